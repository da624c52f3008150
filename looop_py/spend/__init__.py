"""Spend: the daily ledger of tokens and dollars, and the limits on judgment it feeds."""
