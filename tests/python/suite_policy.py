"""The suite's rules for pytest, loaded by conftest.py (pytest_plugins):

1. Binary-only pass. With SPK_BINARY_ONLY=1 (scripts/test.sh's pass against the sanitizer build)
   only the tests whose fixture closure holds one of conftest.BINARY_FIXTURES and none of
   conftest.RELEASE_ONLY_FIXTURES are run; the others are deselected, as their verdict does not
   depend on the binary (or is not about it) and the release pass ran them. Nothing is listed by
   hand: a test that runs the binary must reach it through those fixtures.
2. No quiet greens. With SPK_REQUIRE set (.ci/run sets SPK_REQUIRE=vllm) a skipped test FAILS
   unless it matches an entry of SKIP_ALLOWLIST below, with the reason written there; a module
   skipped at import fails the session (after every other test ran) and is named in its own
   section. So a vLLM that could not be installed, a model that is not cached or a missing tool
   shows as a failure in CI.
3. Durations. The slowest tests are printed at the end (scripts/test.sh passes --durations); the
   per-phase budget is in docs/testing.md.
4. Workers. scripts/test.sh runs pytest in several processes (pytest-xdist, `--dist loadgroup`);
   every test gets an `xdist_group` from its fixture closure, so what must happen once, or one at a
   time, stays on one worker: the tests that serve on vLLM ("vllm": fixed ports, and each server
   takes both cores), those on the session-wide format outputs ("formats": made once per worker),
   and otherwise each module's tests together (its module fixtures made once). Nothing is listed by
   hand; a test's own xdist_group mark wins.

Error policy: a skip outside the allow-list becomes a failed report naming the test and its reason
(tests/python/test_suite_policy.py runs these rules on real pytest sessions).
"""
import fnmatch
import os

import pytest

from conftest import BINARY_FIXTURES, RELEASE_ONLY_FIXTURES

# (node id pattern, fnmatch; a substring of the skip reason; why a skip is right there, in CI too).
SKIP_ALLOWLIST = [
    ("tests/python/test_python_api.py::test_the_repaired_wheel_installs_and_runs_in_a_fresh_venv",
     "SPK_TEST_WHEEL",
     "`pip wheel .` compiles the whole core a third time (about ten minutes on two cores, no ccache "
     "hit: scikit-build-core's own flags) to prove the auditwheel-repaired wheel; run it with "
     "SPK_TEST_WHEEL=1 before a release (docs/python.md). The module itself is tested in CI."),
]


def binary_only() -> bool:
    return os.environ.get("SPK_BINARY_ONLY") == "1"


def strict_skips() -> bool:
    return bool(os.environ.get("SPK_REQUIRE"))


def depends_on_binary(item) -> bool:
    """Whether the test's verdict is the binary's: it uses a binary fixture and no release-only one."""
    used = set(getattr(item, "fixturenames", ()))
    return bool(used & set(BINARY_FIXTURES)) and not used & set(RELEASE_ONLY_FIXTURES)


# Fixtures whose users share one worker (rule 4), first match wins.
WORKER_GROUPS = (("vllm_venv", "vllm"), ("format_quantized", "formats"),
                 ("format_sources", "formats"))


def worker_group(item) -> str:
    used = set(getattr(item, "fixturenames", ()))
    for fixture, group in WORKER_GROUPS:
        if fixture in used:
            return group
    return item.path.name


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): the tests of a group run in one worker "
                            "(suite_policy.py gives every test one from its fixtures)")


# tryfirst: xdist's own hook, which reads the marks under --dist loadgroup, comes after this one.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(worker_group(item)))
    if not binary_only():
        return
    keep = [i for i in items if depends_on_binary(i)]
    dropped = [i for i in items if not depends_on_binary(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def without_group(nodeid: str) -> str:
    """The node id without the "@group" suffix xdist's loadgroup adds to it."""
    head, at, group = nodeid.rpartition("@")
    return head if at and not any(c in group for c in "]:/") else nodeid  # not an "@" in a param


def allowed_skip(nodeid: str, reason: str) -> bool:
    nodeid = without_group(nodeid)
    return any(fnmatch.fnmatch(nodeid, pattern) and text in reason
               for pattern, text, _why in SKIP_ALLOWLIST)


def skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    fail_unlisted_skip(outcome.get_result())


def unlisted_skip(report) -> str:
    """The message for a skipped report that SPK_REQUIRE does not allow, or "" where it is fine."""
    if not (strict_skips() and report.skipped) or hasattr(report, "wasxfail"):
        return ""
    reason = skip_reason(report)
    if allowed_skip(report.nodeid, reason):
        return ""
    return (f"skipped, and this skip is not on tests/python/suite_policy.py's SKIP_ALLOWLIST "
            f"(SPK_REQUIRE={os.environ.get('SPK_REQUIRE')}): {reason}")


def fail_unlisted_skip(report) -> None:
    """Turns a skipped test's report into a failure when its skip is not allowed (SPK_REQUIRE)."""
    message = unlisted_skip(report)
    if message:
        report.outcome = "failed"
        report.longrepr = message


UNLISTED_MODULE_SKIPS: list = []


def pytest_collectreport(report):
    """A whole module skipped at import (allow_module_level) counts like a skipped test, but as a
    failure of the session (a failed collection would stop every other test from running). Under
    xdist every worker collects and the controller receives each worker's report: named once."""
    message = unlisted_skip(report)
    line = f"{report.nodeid}: {message}"
    if message and line not in UNLISTED_MODULE_SKIPS:
        UNLISTED_MODULE_SKIPS.append(line)


def pytest_terminal_summary(terminalreporter):
    if UNLISTED_MODULE_SKIPS:
        terminalreporter.section("modules skipped outside the allow-list")
        for line in UNLISTED_MODULE_SKIPS:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus):
    if UNLISTED_MODULE_SKIPS and exitstatus == 0:
        session.exitstatus = 1
