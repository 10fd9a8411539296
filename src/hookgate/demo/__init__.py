"""`hookgate demo`: the approval gate end to end on embedded defaults."""
