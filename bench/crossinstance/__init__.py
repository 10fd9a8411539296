"""Support for ``bench/approval.py --cross-instance``: the tool it times."""
