"""Microsoft Teams: Adaptive Cards with Action.Execute, clicks as adaptiveCard/action invokes."""
