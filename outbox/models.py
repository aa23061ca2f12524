"""The downstream outbox (seed 004): accepted documents waiting to be registered with the downstream system."""
