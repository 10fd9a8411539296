"""ntfy: push notifications to a phone with Approve/Reject action buttons."""
