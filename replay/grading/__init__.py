"""Grading: graders, the judge, preprocessing, scoring, and grade_test that ties them together."""
