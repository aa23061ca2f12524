"""A grant's access tokens: the refresh state machine (``tokens``) and its rules, refresh, OAuth apps, the
Connect flow (``connect``), the consenting account, and which deployment identity an org may use
(``deployment_grants``).

Below the providers, which ask it for tokens: it imports no provider. A refresh other than RFC 6749's
(Graph's, through msal) is set by the provider that needs it (``apps.refreshed_by``). The Mailbox fields a
grant is bound to (``APP_FIELDS``) are the model's, shared with the admin's form.
"""
