"""Reading stored runs for people: run lists, comparisons and their statistics, reports, audits."""
