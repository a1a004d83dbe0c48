"""The gang's rules as tables: what a timeout does (timeout.py), what a lost member does (onloss.py)."""
