"""The README's streaming example runs as written and prints what the README says it prints."""

import contextlib
import io
import pathlib

README = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_stream_example_runs_and_prints_the_documented_rows():
    section = README[README.index("## A stream into a materialized view"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    documented = code[code.index("print(batch.to_pylist())"):].split("#", 1)[1].splitlines()[0].strip()
    assert out.getvalue().strip() == documented
