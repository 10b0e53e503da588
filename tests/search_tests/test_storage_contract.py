"""The storage contract, held by every backend (Optuna's shared StorageTestCase)."""

from __future__ import annotations

import dataclasses

import pytest

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Timing, Verdict
from cutegen.codegen.llm import LLMCall
from cutegen.codegen.rewriters.base import Move
from cutegen.errors import (
    ConfigError,
    DuplicatedRunError,
    NodeFinishedError,
    RunLockedError,
    RunNotFoundError,
    StorageError,
)
from cutegen.search import NodeState
from cutegen.search.storage import (
    Baseline,
    BestDecision,
    LessonRecord,
    ProfileRecord,
    PruneRecord,
    StoreBaselineCache,
    StoreCallRecorder,
)

MOVE = Move("tunable", "a 1->2", "cheap", {"name": "a", "from": 1, "to": 2})


def _alive(host: str, pid: int) -> bool:
    return True


def _dead(host: str, pid: int) -> bool:
    return False


def _eval(node, verdict=Verdict.CORRECT, t=50.0) -> Evaluation:
    timed = verdict == Verdict.CORRECT
    return Evaluation(candidate_sha256=node.source_sha256, task_sha256="t", stage=Stage.BENCHMARK,
                      verdict=verdict, message="m", details=("d1",),
                      timing=Timing.from_samples([t, t * 1.1, t * 0.9]) if timed else None,
                      eager=Timing.from_samples([100.0, 101.0]) if timed else None,
                      stage_seconds={"verify": 1.0}, flags=("x",))


class TestStorageContract:
    # -- runs -----------------------------------------------------------------------
    def test_create_and_get_run(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task, seed=5))
        assert run.name == "r1" and run.status == "created"
        got = storage.get_run("r1")
        assert got == run
        assert got.config.seed == 5 and dict(got.config.toolchain) == {"torch": "x"}
        assert dict(got.config.settings) == {"k": 1}

    def test_duplicate_name_raises_unless_load_if_exists(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        with pytest.raises(DuplicatedRunError):
            storage.create_run("r1", run_config(task))
        assert storage.create_run("r1", run_config(task), load_if_exists=True) == run
        assert len(storage.list_runs()) == 1

    def test_unknown_run_raises_never_creates(self, storage, task, run_config):
        storage.create_run("r1", run_config(task))
        with pytest.raises(RunNotFoundError):
            storage.get_run("r2")
        assert [r.name for r in storage.list_runs()] == ["r1"]

    @pytest.mark.parametrize("bad", ["", "../x", "a/b", " x", "x" * 200, ".hidden"])
    def test_invalid_run_names(self, storage, task, run_config, bad):
        with pytest.raises(ConfigError):
            storage.create_run(bad, run_config(task))

    def test_run_status(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        storage.set_run_status(run.id, "running")
        assert storage.get_run("r1").status == "running"
        assert run.status == "created"  # snapshots never change
        with pytest.raises(ValueError):
            storage.set_run_status(run.id, "bogus")

    # -- nodes ----------------------------------------------------------------------
    def test_add_node_and_source(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        seed = storage.add_node(run.id, parent_id=None, source=CandidateSource("s0", "seed:x"),
                                move=Move("seed", "seed x"))
        child = storage.add_node(run.id, parent_id=seed.id, source=CandidateSource("s1"),
                                 move=MOVE)
        assert (seed.depth, child.depth) == (1, 2)
        assert child.state == NodeState.WAITING and child.attempts == 0
        assert child.source_path == f"candidates/{child.source_sha256}.py"
        assert storage.get_source(child.id) == "s1"
        assert storage.get_node(child.id).move.key == MOVE.key
        assert seed.origin == "seed:x"
        assert [n.id for n in storage.get_nodes(run.id)] == [seed.id, child.id]
        assert storage.lineage(child.id) == [storage.get_node(seed.id), storage.get_node(child.id)]

    def test_parent_must_exist_in_same_run(self, storage, task, run_config):
        r1 = storage.create_run("r1", run_config(task))
        r2 = storage.create_run("r2", run_config(task))
        n = storage.add_node(r1.id, parent_id=None, source=CandidateSource("s"), move=MOVE)
        with pytest.raises(StorageError):
            storage.add_node(r2.id, parent_id=n.id, source=CandidateSource("t"), move=MOVE)
        with pytest.raises(StorageError):
            storage.add_node(r1.id, parent_id=999, source=CandidateSource("t"), move=MOVE)
        with pytest.raises(StorageError):
            storage.get_node(999)

    def test_state_machine(self, storage, task, run_config, clock):
        run = storage.create_run("r1", run_config(task))
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource("s"), move=MOVE)
        with pytest.raises(StorageError):  # WAITING -> COMPLETE is not allowed
            storage.set_node_state(n.id, NodeState.COMPLETE)
        clock.advance(1)
        r = storage.set_node_state(n.id, NodeState.RUNNING, expected=NodeState.WAITING,
                                   session_id=None)
        assert r.state == NodeState.RUNNING and r.heartbeat_at == clock.now
        with pytest.raises(StorageError):  # compare-and-set: already claimed
            storage.set_node_state(n.id, NodeState.RUNNING, expected=NodeState.WAITING)
        done = storage.set_node_state(n.id, NodeState.COMPLETE)
        assert done.finished_at == clock.now and done.state.is_finished()
        for st in NodeState:
            with pytest.raises(NodeFinishedError):
                storage.set_node_state(n.id, st)
        assert n.state == NodeState.WAITING  # the old snapshot is unchanged
        with pytest.raises(dataclasses.FrozenInstanceError):
            n.state = NodeState.FAILED  # type: ignore[misc]

    def test_get_nodes_by_state(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        a = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        b = storage.add_node(run.id, parent_id=None, source=CandidateSource("b"), move=MOVE)
        storage.set_node_state(b.id, NodeState.RUNNING)
        assert [n.id for n in storage.get_nodes(run.id, states=[NodeState.WAITING])] == [a.id]
        assert storage.n_nodes(run.id, states=[NodeState.RUNNING]) == 1

    def test_requeue(self, storage, task, run_config, clock):
        run = storage.create_run("r1", run_config(task))
        s, _ = storage.open_session(run.id, host="h", pid=1, stale_after_s=60, is_alive=_alive)
        a = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        b = storage.add_node(run.id, parent_id=None, source=CandidateSource("b"), move=MOVE)
        storage.set_node_state(a.id, NodeState.RUNNING, session_id=s.id)
        clock.advance(100)
        storage.set_node_state(b.id, NodeState.RUNNING, session_id=s.id)
        got = storage.requeue_stale_nodes(run.id, older_than=clock.now - 50)
        assert [(n.id, n.state, n.attempts) for n in got] == [(a.id, NodeState.WAITING, 1)]
        assert storage.requeue_stale_nodes(run.id, older_than=0, dead_sessions={s.id})[0].id == b.id
        storage.set_node_state(a.id, NodeState.RUNNING)
        assert storage.requeue_node(a.id).attempts == 2
        with pytest.raises(StorageError):
            storage.requeue_node(a.id)  # not RUNNING any more

    # -- sessions -------------------------------------------------------------------
    def test_sessions_lease(self, storage, task, run_config, clock):
        run = storage.create_run("r1", run_config(task))
        s1, ended = storage.open_session(run.id, host="h", pid=1, stale_after_s=60,
                                         is_alive=_alive)
        assert ended == []
        with pytest.raises(RunLockedError):
            storage.open_session(run.id, host="h", pid=2, stale_after_s=60, is_alive=_alive)
        s2, ended = storage.open_session(run.id, host="h", pid=2, stale_after_s=60,
                                         is_alive=_dead)
        assert [e.id for e in ended] == [s1.id] and ended[0].end_reason == "died"
        clock.advance(30)
        storage.heartbeat(s2.id)
        clock.advance(45)  # 45 s since the last heartbeat: still live
        with pytest.raises(RunLockedError):
            storage.open_session(run.id, host="h", pid=3, stale_after_s=60, is_alive=_alive)
        clock.advance(20)  # now stale
        s3, ended = storage.open_session(run.id, host="h", pid=3, stale_after_s=60,
                                         is_alive=_alive)
        assert [e.id for e in ended] == [s2.id]
        storage.close_session(s3.id, "finished")
        sessions = storage.get_sessions(run.id)
        assert [s.end_reason for s in sessions] == ["died", "died", "finished"]
        s4, ended = storage.open_session(run.id, host="h", pid=4, stale_after_s=60,
                                         is_alive=_alive)
        assert ended == [] and s4.id not in {s1.id, s2.id, s3.id}

    def test_heartbeat_stamps_running_node(self, storage, task, run_config, clock):
        run = storage.create_run("r1", run_config(task))
        s, _ = storage.open_session(run.id, host="h", pid=1, stale_after_s=60, is_alive=_alive)
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        storage.set_node_state(n.id, NodeState.RUNNING, session_id=s.id)
        clock.advance(7)
        storage.heartbeat(s.id, n.id)
        assert storage.get_node(n.id).heartbeat_at == clock.now
        assert storage.get_node(n.id).session_id == s.id
        assert storage.get_sessions(run.id)[0].heartbeat_at == clock.now

    # -- evaluations ----------------------------------------------------------------
    def test_evaluation_roundtrip_once_per_node(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        ev = _eval(n)
        rid = storage.record_evaluation(n.id, ev, reward=0.5, gpu_seconds=2.0)
        assert storage.get_evaluation(n.id) == ev
        (r,) = storage.get_results(run.id)
        assert (r.id, r.node_id, r.verdict, r.reward, r.gpu_seconds) == (rid, n.id,
                                                                          Verdict.CORRECT, 0.5, 2.0)
        assert r.time_us == ev.time_us and r.speedup_eager == pytest.approx(ev.speedup_eager)
        with pytest.raises(StorageError):
            storage.record_evaluation(n.id, ev, reward=0.5)
        assert len(storage.get_results(run.id)) == 1
        assert storage.verdict_counts(run.id) == {"correct": 1}

    def test_evaluation_of_another_candidate_is_refused(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        other = dataclasses.replace(_eval(n), candidate_sha256="f" * 64)
        with pytest.raises(StorageError):
            storage.record_evaluation(n.id, other, reward=0.0)

    def test_results_in_commit_order(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        a = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        b = storage.add_node(run.id, parent_id=None, source=CandidateSource("b"), move=MOVE)
        storage.record_evaluation(b.id, _eval(b, Verdict.WRONG), reward=-3.5)
        storage.record_evaluation(a.id, _eval(a), reward=1.0)
        assert [r.node_id for r in storage.get_results(run.id)] == [b.id, a.id]

    def test_harness_versions_count_each_evaluators_verdicts(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        assert storage.get_harness_versions(run.id) == {}
        nodes = [storage.add_node(run.id, parent_id=None, source=CandidateSource(c), move=MOVE)
                 for c in "abc"]
        for n, v in zip(nodes, (3, 5, 5), strict=True):
            storage.record_evaluation(n.id, dataclasses.replace(_eval(n), harness_version=v),
                                      reward=1.0)
        assert storage.get_harness_versions(run.id) == {3: 1, 5: 2}

    def test_an_evaluation_stored_without_a_version_reads_as_version_0(self, storage, task,
                                                                        run_config):
        """A record from before the field existed: its count and the record read back agree
        (the record read back as this cutegen's version while the count said 0)."""
        run = storage.create_run("r1", run_config(task))
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        d = _eval(n).to_dict()
        del d["harness_version"]
        storage.record_evaluation(n.id, Evaluation.from_dict(d), reward=1.0)
        assert storage.get_evaluation(n.id).harness_version == 0
        assert storage.get_harness_versions(run.id) == {0: 1}

    # -- transactions ---------------------------------------------------------------
    def test_atomic_rolls_everything_back(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        n0 = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        with pytest.raises(RuntimeError), storage.atomic():
            n = storage.add_node(run.id, parent_id=None, source=CandidateSource("b"), move=MOVE)
            storage.record_evaluation(n.id, _eval(n), reward=0.1)
            storage.set_node_state(n0.id, NodeState.RUNNING)
            with storage.atomic():  # nested blocks join the outer one
                storage.add_lesson(_lesson(run.id, n.id))
            raise RuntimeError("boom")
        assert [x.id for x in storage.get_nodes(run.id)] == [n0.id]
        assert storage.get_node(n0.id).state == NodeState.WAITING
        assert storage.get_results(run.id) == [] and storage.get_lessons() == []
        n2 = storage.add_node(run.id, parent_id=None, source=CandidateSource("c"), move=MOVE)
        assert n2.id == n0.id + 1  # ids are derived from committed rows only

    # -- side facts -----------------------------------------------------------------
    def test_lessons_queries(self, storage, task, run_config):
        r1 = storage.create_run("r1", run_config(task))
        r2 = storage.create_run("r2", run_config(task))
        n = storage.add_node(r1.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        storage.add_lesson(_lesson(r1.id, n.id, task="softmax_fp32", parent="p1"))
        storage.add_lesson(_lesson(r2.id, n.id, task="softmax_bf16", parent="p2"))
        storage.add_lesson(_lesson(r2.id, n.id, task="softmaxx", parent="p1"))
        storage.add_lesson(_lesson(r2.id, n.id, task="gemm_fp32", parent="p1"))
        assert [x.task_name for x in storage.get_lessons(task_prefix="softmax")] == [
            "softmax_bf16", "softmax_fp32"]
        assert [x.task_name for x in storage.get_lessons(parent_sha256="p1")] == [
            "gemm_fp32", "softmaxx", "softmax_fp32"]
        assert len(storage.get_lessons(run_id=r2.id)) == 3
        assert len(storage.get_lessons(limit=2)) == 2
        assert storage.get_lessons(task_name="gemm_fp32")[0].ratio == 1.5

    def test_prunes_are_idempotent(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        assert storage.record_prune(PruneRecord(run.id, 0, "exhausted:initial", "r"))
        assert not storage.record_prune(PruneRecord(run.id, 0, "exhausted:initial", "again"))
        assert storage.record_prune(PruneRecord(run.id, 0, "dead_end", "x", {"m": 3}))
        assert [(p.kind, dict(p.details)) for p in storage.get_prunes(run.id)] == [
            ("exhausted:initial", {}), ("dead_end", {"m": 3})]

    def test_best_history(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        a = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        b = storage.add_node(run.id, parent_id=None, source=CandidateSource("b"), move=MOVE)
        assert storage.get_best_node(run.id) is None
        storage.record_best(BestDecision(run.id, a.id, None, True, "first"))
        storage.record_best(BestDecision(run.id, b.id, a.id, False, "not significant",
                                         p_value=0.3, u_statistic=12.0, n_new=30, n_old=30))
        assert storage.get_best_node(run.id).id == a.id
        hist = storage.get_best_history(run.id)
        assert [h.accepted for h in hist] == [True, False] and hist[1].p_value == 0.3

    def test_llm_calls_and_spending(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        other = storage.create_run("r2", run_config(task))
        first = LLMCall("c0", 1, "initial", "m", "http://x/v1", "sys", "p", "r",
                        prompt_tokens=10, completion_tokens=20, cost_usd=0.25,
                        cost_basis="usage", latency_s=1.0, started_at=5.0, streamed=True)
        slow = LLMCall("c0", 2, "initial", "m", "http://x/v1", "sys", "p", "", cost_usd=0.5,
                       cost_basis="reserved", outcome="timeout", error="slow")
        unpriced = LLMCall("c1", 1, "rewrite", "m", "u", "sys", "p", "r", cost_usd=None,
                           cost_basis="unpriced", http_status=200, candidate_sha256="ab",
                           structured=True)
        storage.record_llm_call(run.id, first)
        storage.record_llm_call(run.id, slow)
        storage.record_llm_call(other.id, unpriced)
        assert storage.llm_spent_usd(run.id) == pytest.approx(0.75)
        assert storage.llm_spent_usd(other.id) == 0.0
        # the store gives back the records it was given: one record for client and store
        assert storage.get_llm_calls(run.id) == [first, slow]
        assert storage.get_llm_calls(other.id) == [unpriced]
        tracker = StoreCallRecorder(storage, run.id)
        tracker.record(first)
        assert tracker.spent_usd() == pytest.approx(1.0)

    def test_baselines_first_kept(self, storage):
        cache = StoreBaselineCache(storage)
        assert cache.get("t", "env") is None
        cache.put("t", "env", {"eager": [1.0, 2.0], "compiled": None})
        cache.put("t", "env", {"eager": [9.0]})
        assert cache.get("t", "env") == {"eager": [1.0, 2.0], "compiled": None}
        assert storage.get_baseline("t", "other") is None
        storage.put_baseline(Baseline("t", "other", {"x": 1}))
        assert dict(storage.get_baseline("t", "other").value) == {"x": 1}

    def test_profiles(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource("a"), move=MOVE)
        from cutegen.profilers import Finding

        found = (Finding("k", 1), Finding("hint.vector_width", 128, "use 128-bit loads"))
        storage.record_profile(ProfileRecord(n.id, "sass", "ok", found, "p/x.sass", 1.5,
                                             error="a note"))
        (p,) = storage.get_profiles(n.id)
        assert p.findings == found and p.guidance == ("use 128-bit loads",)  # derived
        assert p.artifact_path == "p/x.sass" and p.error == "a note"

    def test_blobs_content_addressed(self, storage, task, run_config):
        run = storage.create_run("r1", run_config(task))
        rel = storage.put_blob(run.id, "logs", b"hello", suffix=".txt")
        assert rel.startswith("logs/") and rel.endswith(".txt")
        assert storage.put_blob(run.id, "logs", b"hello", suffix=".txt") == rel
        assert storage.get_blob(run.id, rel) == b"hello"
        with pytest.raises(StorageError):
            storage.get_blob(run.id, "logs/" + "0" * 64 + ".txt")


def _lesson(run_id: int, node_id: int, *, task: str = "toy_fp32", parent: str = "p"
            ) -> LessonRecord:
    return LessonRecord(run_id, node_id, node_id, parent, task, "t", "tunable", "tunable(a=1)",
                        "a 1->2", "faster", 1.5, 100.0, 66.7, f"lesson on {task}")
