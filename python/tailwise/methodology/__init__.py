"""The self-correcting methodology (Lancet §4.3, done completely): the coordinator decides
warm-up, duration, sampling and sample count, and answers with percentiles and their confidence
intervals or with "not measurable" and every failed check."""

from tailwise.methodology.analysis import Analysis, Precision, analyse
from tailwise.methodology.checks import Check
from tailwise.methodology.controller import Controller

__all__ = ["Analysis", "Check", "Controller", "Precision", "analyse"]
