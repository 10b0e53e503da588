"""cutegen.codegen: tasks, candidates, rewriters, prompts and the process-isolated evaluator.

The search process only reads candidates as text; a worker process
(``python -m cutegen.codegen.eval.worker``) imports and runs them, and the trusted reference
worker (``python -m cutegen.codegen.eval.refworker``) computes every verdict.
"""
