"""The evaluator rebuilt so that no candidate can forge its verdict or its time.

Facts a verdict rests on are observed from outside the candidate's reach: the native
observer (``native/observer.c``, built by :mod:`.observer_build`, its stream decoded by
:mod:`.observer_records`, both channel ends in :mod:`.observer`) records what ran on the GPU
and sends it to the parent in authenticated frames.
"""
