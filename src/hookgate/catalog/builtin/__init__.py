"""The hooks the catalog ships with, one module each; the catalog names them (catalog.py)."""
