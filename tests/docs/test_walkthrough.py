"""The tutorial's runner (tests/docs/walkthrough.py) reads a page's steps as a reader would, and compares
only what does not vary between runs; and "A first gang" is laid out as the runner and a reader expect.
The page itself runs in tests/e2e/test_docs_first_gang.py."""

from __future__ import annotations

from pathlib import Path

from tests.docs import walkthrough

ROOT = Path(__file__).resolve().parents[2]
FIRST_GANG = ROOT / "docs" / "getting-started" / "first-gang.md"

PAGE = """# A page

```sh
scripts/demo
```

## 1. First

```sh
eval "$(scripts/cluster env --name demo)"
kubectl get pods
```

```text
NAME          READY   AGE
job-9-x7k2p   1/1     3s
```

## 2. Second

```sh
kubectl get events --watch \\
  --field-selector reason=Started
```

```text
LAST SEEN   REASON
0s          Started
```

```sh
kubectl delete pod job-9-x7k2p
```

## Afterwards

```sh
not a step
```
"""


def test_blocks_are_the_numbered_steps_commands_with_the_output_after_them() -> None:
    found = walkthrough.blocks(PAGE)
    assert [(block.step, block.commands.splitlines()[-1].strip()) for block in found] == [
        (1, "kubectl get pods"),
        (2, "--field-selector reason=Started"),
        (2, "kubectl delete pod job-9-x7k2p"),
    ]
    assert found[0].output == "NAME          READY   AGE\njob-9-x7k2p   1/1     3s"
    assert found[2].output is None
    assert [block.read_only for block in found] == [True, True, False]
    assert [block.watches for block in found] == [False, True, False]


def test_ages_durations_pod_suffixes_and_column_widths_do_not_count() -> None:
    assert walkthrough.normalised("job-9-x7k2p   1/1     3s\n\n  bound in 0.03s, 14m31s left  ") == [
        "job-9-<id> 1/1 <t>",
        "bound in <t>, <t> left",
    ]
    # Words that only look like suffixes stay: Kubernetes' suffixes have no vowels.
    assert walkthrough.normalised("task-group-example") == ["task-group-example"]


def test_a_difference_names_the_step_and_the_lines_that_differ() -> None:
    block = walkthrough.blocks(PAGE)[0]
    assert walkthrough.differences(block, "NAME READY AGE\njob-9-zq8wn 1/1 9m\n") is None
    said = walkthrough.differences(block, "NAME READY AGE\njob-9-zq8wn 0/1 9m\n")
    assert said is not None and said.startswith("step 1, `eval")
    assert "-job-9-<id> 1/1 <t>" in said and "+job-9-<id> 0/1 <t>" in said


def test_a_page_named_pod_is_the_runs_pod_of_that_prefix_in_later_commands(tmp_path: Path) -> None:
    run = walkthrough.Run(tmp_path, {}, printed=["job-9-b2c4d"])
    assert run.page_commands(walkthrough.blocks(PAGE)[2]) == "kubectl delete pod job-9-b2c4d"


def test_the_first_gang_starts_from_the_demo_and_numbers_its_steps_in_order() -> None:
    page = FIRST_GANG.read_text()
    found = walkthrough.blocks(page)
    steps = [block.step for block in found]
    assert steps == sorted(steps) and set(steps) == set(range(1, steps[-1] + 1)), steps
    assert "scripts/demo" in page.split("\n## 1. ", 1)[0], "the page must start the demo cluster before step 1"
    assert found[0].commands.startswith('eval "$(scripts/cluster env --name demo)"')
    assert all(block.output is not None for block in found), "every step's command shows what it prints"
