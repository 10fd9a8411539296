"""Framework adapters: each framework's own extension point over a hookgate guard
(hookgate.client: a server's ``/api/v1`` or the in-process guard). One module per framework,
installed with its extra; they import nothing of hookgate but hookgate.client.
"""
