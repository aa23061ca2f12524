"""Reading one message, pure: headers, MIME leaves, TNEF, text, the parsed message and its triage.

No module here imports any other part of mailpoll (nor the database): every other room may use it.
"""
