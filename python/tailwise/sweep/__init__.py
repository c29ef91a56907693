"""`tailwise sweep`: loads searched, points measured, the capacity, knee and SLO answers."""
