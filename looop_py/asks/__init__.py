"""Asks: questions and approvals to a human, their answers (the mailbox), and `looop tell`."""
