"""OpenID Connect sign-in for people: the inbox's browser sessions and the CLI's, their
users and groups from the identity provider, and access that ends when the provider says so.
"""
