"""The docs agree with the code: every pointer from code and configs into the docs names a file and section that
exist, a new variant is complete (docs/adding_a_variant.md's places), and the repository cites commits and dates, not
how its work was organised. Text only: no torch, no training."""
import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import sweep as sweep_py  # noqa: E402


def tracked(*patterns):
    """The repository's files that git tracks (a fresh clone's), by pathspec; every file under ROOT without git."""
    try:
        out = subprocess.run(['git', 'ls-files', '-z', '--', *patterns], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
        return sorted(p for p in out.split('\0') if p and os.path.isfile(os.path.join(ROOT, p)))
    except (OSError, subprocess.CalledProcessError):
        pytest.skip('not a git checkout')


def read(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


# ----------------------------------------------------------------------------- pointers into the docs

def code_files():
    """Where code and configs point into the docs: every tracked file but the docs and results themselves."""
    return [p for p in tracked() if not p.endswith(('.md', '.json', '.jsonl', '.png', '.txt', '.csv'))
            and not p.startswith(('results/', 'docs/'))]


def doc_files():
    return ['README.md'] + tracked('docs/*.md')


# a path into the docs or results (a placeholder such as results/<sweep>/ or configs/{a,b} stops the match)
PATH = re.compile(r'(?<![\w/.])((?:docs|results)/[\w./-]*[\w/]|README\.md)(?![<{*$\w])')
# a section of a doc: README's "Quick start", docs/config.md's "Model keys", README, "Quick start" (a quote may be
# escaped inside a string, and the name may continue on the next line of a docstring or comment)
SECTION = re.compile(r'(README(?:\.md)?|(?:docs|results)/[\w./-]+\.md)(?:\'s|,)\s+(?:#\s*)?\\?"([^"\\]+)\\?"')
# README on its own: a pointer that names no section, which a moved section leaves stale unnoticed. Another
# project's README ("microsoft/unilm's README") is a citation, not a pointer
BARE_README = re.compile(r'(?<![\w/.-]\'s )README(?!(?:\.md)?(?:\'s|,)\s+(?:#\s*)?\\?")')


def elsewhere(before):
    """Whether the path after `before` is not this repository's: a command's output (--json results/bench.json), or
    a file of another repository cited by name (guygrigsby/diff-mlx, `docs/...`)."""
    return re.search(r'(--\w+[ =]|[\w.-]+/[\w.-]+,\s*`?)$', before) is not None


def headings(path):
    """The markdown headings of a doc, their text without markup."""
    return [re.sub(r'[`*]', '', m).strip() for m in re.findall(r'^#+\s+(.*)$', read(path), re.M)]


def names_a_heading(name, heads):
    """A section named by its heading, or by the heading's start ("Attention" for "Attention: how the variants ...")."""
    name = ' '.join(name.split())
    return any(h == name or (h.startswith(name) and not h[len(name)].isalnum()) for h in heads)


def stale_pointers(files):
    """(file, line, what) of each pointer whose target file or section is missing."""
    found = []
    for path in files:
        text = read(path)
        line = lambda m: text.count('\n', 0, m.start()) + 1  # noqa: E731
        for m in PATH.finditer(text):
            if not os.path.exists(os.path.join(ROOT, m[1])) and not elsewhere(text[:m.start()]):
                found.append((path, line(m), f'{m[1]}: no such file'))
        for m in SECTION.finditer(text):
            target = 'README.md' if m[1].startswith('README') else m[1]
            if os.path.exists(os.path.join(ROOT, target)) and not names_a_heading(m[2], headings(target)):
                found.append((path, line(m), f'{target} has no section "{" ".join(m[2].split())}"'))
    return found


def sectionless_readme_pointers(files):
    found = []
    for path in files:
        text = read(path)
        found += [(path, text.count('\n', 0, m.start()) + 1, 'README without its section: write README\'s "Section"')
                  for m in BARE_README.finditer(text)]
    return found


def test_every_pointer_from_code_into_the_docs_exists():
    """A pointer from code, configs or tests into the docs (a path under docs/ or results/, README.md, a section as
    README's "Quick start" or docs/config.md's "Model keys") names a file and a heading that exist; one into the
    README names its section, which is how a moved section shows up here rather than to a reader."""
    files = code_files()
    assert 'configs/base_shakespeare_char.py' in files and 'dataset.py' in files and 'ablate.sh' in files
    assert stale_pointers(files) == []
    assert sectionless_readme_pointers(files) == []


def test_every_pointer_between_the_docs_exists():
    """The README's and docs/'s own paths and sections: a renamed results file or heading fails here."""
    assert stale_pointers(doc_files()) == []


def test_the_pointer_check_catches_what_went_stale(tmp_path, monkeypatch):
    """The stale pointers that once shipped, each caught: a README pointer without a section, a section the README
    does not have, a doc section that moved, a results file that is not there. And what is not a pointer passes: a
    placeholder path, another project's README."""
    stale = {'a.py': '# explained in the README (README).\n',
             'b.py': 'raise ValueError("... for GPT-2 tokens (README, \\"dataset\\")")\n',
             'c.py': '"""docs/details.md\'s\n    "What survives whom" table."""\n',
             'd.py': "# results/no_such_sweep.md\n"}
    fine = {'e.py': "# microsoft/unilm's README; results/<sweep>/results.md; configs/{a,b}_3L.py; results/\n",
            'f.py': '# docs/config.md\'s "Model keys"; the README\'s "Quick start"; docs/details.md\'s\n'
                    '# "What survives what"\n'}
    monkeypatch.setattr(sys.modules[__name__], 'ROOT', str(tmp_path))
    for name in ('README.md', 'docs/details.md', 'docs/config.md'):
        os.makedirs(tmp_path / os.path.dirname(name), exist_ok=True)
        with open(os.path.join(os.path.dirname(__file__), '..', name), encoding='utf-8') as f:
            (tmp_path / name).write_text(f.read())
    (tmp_path / 'results').mkdir()
    for name, text in {**stale, **fine}.items():
        (tmp_path / name).write_text(text)
    found = {p for p, _, _ in stale_pointers(list(stale) + list(fine)) + sectionless_readme_pointers(
        list(stale) + list(fine))}
    assert found == set(stale)


# ----------------------------------------------------------------------------- how the work is cited

# an internal stage of the work or an internal issue by number, where a commit and a date say it for a reader. A
# citation of another project's thread (microsoft/unilm issue 1663) names its repository first
INTERNAL = re.compile(r'(\S+\s+)?(\bsessions? \d+|\bissues? #?\d+|\(#\d+\))', re.I)


def internal_references(text):
    return [m[2] for m in INTERNAL.finditer(text) if not (m[2].lower().startswith('issue') and '/' in (m[1] or ''))]


def test_the_repository_cites_commits_and_dates_not_its_work_sessions():
    """Code, docs and results say when something changed by commit and date ("since commit 1d93be1, 2026-11-24"),
    not by the stage of the work or the internal issue that brought it ("session 8", "issue 31", "(#28)")."""
    found = [(p, ref) for p in tracked('*.py', '*.sh', '*.md', '.ci/*') for ref in internal_references(read(p))]
    assert found == []
    assert internal_references('files before session 8 lack them; fails without its fix (issue 31); (#28); '
                               'issue #27') == ['session 8', 'issue 31', '(#28)', 'issue #27']
    assert internal_references('microsoft/unilm issue 1663; a pytest session starts; commit 1d93be1') == []
