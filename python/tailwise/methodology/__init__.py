"""The self-correcting methodology (Lancet §4.3, done completely): the coordinator decides
warm-up, duration, sampling and sample count, and answers with percentiles and their confidence
intervals or with "not measurable" and every failed check."""

from tailwise.methodology.analysis import analyse
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.spec.precision import Precision
from tailwise.methodology.checks import Check
from tailwise.methodology.controller import Controller
from tailwise.methodology.result import Analysis

__all__ = ["Analysis", "AnalysisInput", "Check", "Controller", "Precision", "RunPlan", "analyse"]
