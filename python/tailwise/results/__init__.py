"""What commands write and read back: the summary, the results directory's files, datasets."""
