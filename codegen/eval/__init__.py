"""The evaluator: static checks, compile, verify and benchmark a candidate in processes it
can kill, with every verdict and time decided from observations the candidate cannot
write (docs/threat-model.md).

The facts come from the native observer (``native/observer.c``, built by
:mod:`.observer_build`, its stream decoded by :mod:`.observer_records`, both channel ends
in :mod:`.observer`), which records what ran on the GPU and sends it to the parent in
authenticated frames; :mod:`.activity` and :mod:`.verdict` turn them into a verdict.
"""
