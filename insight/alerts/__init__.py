"""Alerts: detecting drops and late data, recording them once, showing and mailing what is open."""
