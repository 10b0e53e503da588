"""The evaluator: static checks, compile, verify and benchmark a candidate in processes it
can kill, with every verdict and time decided from observations the candidate cannot
write (docs/threat-model.md)."""
