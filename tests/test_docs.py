"""The docs agree with the code: every pointer from code and configs into the docs names a file and section that
exist, a new variant is complete (docs/adding_a_variant.md's places), and the repository cites commits and dates, not
how its work was organised. No training: the variant checks import model.py and config.py, the rest reads text."""
import ast
import functools
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SELF = 'tests/test_docs.py'  # left out of the scans: its examples of what they catch are stale on purpose
sys.path.insert(0, ROOT)
import variants  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, 'evidence'))
import claims  # noqa: E402

TO_COME = set(claims.FILLS)  # the folders of the runs claims.py's rows wait on (each row names its command)


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
            and not p.startswith(('results/', 'docs/')) and p != SELF]


def doc_files():
    return ['README.md'] + tracked('docs/*.md')


# a path into the docs or results (a placeholder such as results/<sweep>/ or configs/{a,b} stops the match)
PATH = re.compile(r'(?<![\w/.])((?:docs|results)/[\w./-]*[\w/]|README\.md)(?![<{*$\w])')
# a section of a doc: README's "Quick start", docs/config.md's "Model keys", README, "Quick start" (a quote may be
# escaped inside a string, and the name may continue on the next line of a docstring or comment)
SECTION = re.compile(r'(README(?:\.md)?|(?:docs|results)/[\w./-]+\.md)(?:\'s|,)\s+(?:#\s*)?\\?"([^"\\]+)\\?"')


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
            if not os.path.exists(os.path.join(ROOT, m[1])) and not elsewhere(text[:m.start()]) \
                    and m[1].rstrip('/') not in TO_COME:
                found.append((path, line(m), f'{m[1]}: no such file'))
        for m in SECTION.finditer(text):
            target = 'README.md' if m[1].startswith('README') else m[1]
            if os.path.exists(os.path.join(ROOT, target)) and not names_a_heading(m[2], headings(target)):
                found.append((path, line(m), f'{target} has no section "{" ".join(m[2].split())}"'))
    return found


def test_every_pointer_from_code_into_the_docs_exists():
    """A pointer from code, configs or tests into the docs (a path under docs/ or results/, README.md, a section as
    README's "Quick start" or docs/config.md's "Model keys") names a file and a heading that exist, but for the
    folders of claims.py's runs to come (claims.FILLS), which its rows name with the command that makes them."""
    files = code_files()
    assert 'configs/base_shakespeare_char.py' in files and 'dataset.py' in files and 'ablate.sh' in files
    assert stale_pointers(files) == []


def test_every_pointer_between_the_docs_exists():
    """The README's and docs/'s own paths and sections: a renamed results file or heading fails here."""
    assert stale_pointers(doc_files()) == []


def test_the_pointer_check_catches_what_went_stale(tmp_path, monkeypatch):
    """The stale pointers that once shipped, each caught: a section the README does not have, a doc section that
    moved, a results file that is not there. And what is not a pointer passes: a placeholder path, another project's
    README, a README named without a section."""
    stale = {'b.py': 'raise ValueError("... for GPT-2 tokens (README, \\"dataset\\")")\n',
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
    found = {p for p, _, _ in stale_pointers(list(stale) + list(fine))}
    assert found == set(stale)


# ----------------------------------------------------------------------------- how the work is cited

# an internal stage of the work or an internal issue by number, where a commit and a date say it for a reader. A
# citation of another project's thread (microsoft/unilm issue 1663) names its repository first
INTERNAL = re.compile(r'(\S+\s+)?(\bsessions? \d+|\bissues? #?\d+|\(#\d+\))', re.I)


def internal_references(text):
    return [m[2] for m in INTERNAL.finditer(text) if not (m[2].lower().startswith('issue') and '/' in (m[1] or ''))]


def test_committed_text_names_no_internal_references_a_reader_cannot_follow():
    """Code, docs and results say when something changed by commit and date ("since commit 1d93be1, 2026-11-24"),
    not by the stage of the work or the internal issue that brought it ("session 8", "issue 31", "(#28)"): a reader
    of a clone cannot follow those, and a commit they can (git show)."""
    found = [(p, ref) for p in tracked('*.py', '*.sh', '*.md', '.ci/*') if p != SELF
             for ref in internal_references(read(p))]
    assert found == []
    assert internal_references('files before session 8 lack them; fails without its fix (issue 31); (#28); '
                               'issue #27') == ['session 8', 'issue 31', '(#28)', 'issue #27']
    assert internal_references('microsoft/unilm issue 1663; a pytest session starts; commit 1d93be1') == []


# ----------------------------------------------------------------------------- a variant's places

PAGE = 'docs/adding_a_variant.md'
# the self-tests' flag, value and variant: no real one may take the name (test_the_made_up_name_is_no_real_one), so
# the self-tests keep passing once a variant of any name is added by the page
MADE_UP = 'made_up_flag'
NANOGPT_SHAPE = {'block_size', 'vocab_size', 'n_layer', 'n_head', 'n_embd', 'dropout', 'bias'}  # not attention
CELL = re.compile(r'(\w+)_(\d+[LM])\.py')  # configs/<stem>_<depth>.py


def model_flags():
    """{flag: the values model.py allows for it (model.CHOICES, default first; () for a bool or a number)} of the
    GPTConfig fields that choose the model's math (all but nanoGPT's shape)."""
    import dataclasses

    import model
    return {f.name: model.CHOICES.get(f.name, ()) for f in dataclasses.fields(model.GPTConfig)
            if f.name not in NANOGPT_SHAPE}


def place(step, file, where, what):
    """A failure as the page's step says to mend it: the file, the place in it, what is missing."""
    return f"{file}, {where}: {what} ({PAGE}, step {step})"


def reference(test_source):
    """(the attributes, the string constants) that tests/test_model.py's float64 reference (ref_*, expected_*, dims)
    reads and compares: the flags and values whose math it computes from the papers' formulas."""
    nodes = [n for f in ast.parse(test_source).body
             if isinstance(f, ast.FunctionDef) and f.name.startswith(('ref_', 'expected_', 'dims')) for n in ast.walk(f)]
    return ({n.attr for n in nodes if isinstance(n, ast.Attribute)},
            {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)})


def untested(flags, test_source):
    """Each flag, and each value of a flag but its default, without a test of its math: the reference reads the flag
    (cfg.flag) and a test sets it (flag=...), and it compares each value ('value'); or each value has a test named
    after it (leak's bugs, each checked against its own formula)."""
    reads, constants = reference(test_source)
    tests = re.findall(r'^def (test_\w+)', test_source, re.M)
    out = []
    for flag, values in flags.items():
        named = values[1:] and all(any(v in t for t in tests) for v in values[1:])
        if named:
            continue
        if not (flag in reads and re.search(rf'\b{flag}=', test_source)):
            out.append(place(6, 'tests/test_model.py', 'ref_attention() (or ref_norm(), ref_mlp(), ref_logits())',
                             f"no test of model.py's {flag} math: the reference must read cfg.{flag} and a test set "
                             f"{flag}=..."))
        out += [place(6, 'tests/test_model.py', 'ref_attention() (or ref_norm(), ref_mlp(), ref_logits())',
                      f"no math for {flag}={v!r}: the reference must compute it (cfg.{flag} == {v!r})")
                for v in values[1:] if v not in constants]
    return out


def undocumented(flags, config_md):
    """Each flag without a row of docs/config.md's model-key table (a row may name several: `norm`, `mlp`, ...),
    and each value but the default that its row does not name (`'diff'`)."""
    table = config_md.split('## Model keys')[1].split('\n## ')[0]
    rows = {n: row for row in table.splitlines() if row.startswith('|')
            for n in re.findall(r'`(\w+)`', row.split('|')[1])}
    out = []
    for flag, values in flags.items():
        if flag not in rows:
            out.append(place(5, 'docs/config.md', 'the "Model keys" table', f"no row for `{flag}`"))
            continue
        out += [place(5, 'docs/config.md', 'the "Model keys" table', f"the row of `{flag}` does not name {v!r}")
                for v in values[1:] if repr(v) not in rows[flag]]
    return out


def row_of(stem, table):
    """The variants.py row a config stem runs: its name, or a prefix of variants.PREFIXES and its name."""
    for prefix in ('', *variants.PREFIXES):
        if stem.startswith(prefix) and stem[len(prefix):] in table:
            return stem[len(prefix):]
    return None


def rows_and_configs(config_names, table, resolved):
    """The table and the configs agree: every configs/<stem>_<depth>.py has a row (report.py would have no label or
    column for its runs), every row has a config, and each config resolves to its row's switches (variant('<name>'))."""
    out = []
    stems = {}
    for f in sorted(config_names):
        if (m := CELL.fullmatch(f)) and not f.startswith('base_'):
            stems.setdefault(m[1], []).append(f)
    for stem in sorted(stems):
        name = row_of(stem, table)
        if name is None:
            out.append(place(3, 'variants.py', 'VARIANTS', f"no row for {stem}, which configs/{stem}_<depth>.py is"))
            continue
        for f in stems[stem]:
            # the switches (a name or a bool); a number that tunes the variant may be the setting's own (the
            # paper's lambda_init schedule in configs/diff_124M.py, nd_diff_2L.py: no seed offset)
            wrong = {k: v for k, v in table[name]['flags'].items()
                     if isinstance(v, (str, bool)) and resolved(f).get(k) != v}
            if wrong:
                out.append(place(4, f'configs/{f}', 'its flags', f"resolves {', '.join(wrong)} otherwise than "
                                 f"variants.py's row {name!r}: write variant({name!r})"))
    have = {row_of(stem, table) for stem in stems}
    out += [place(4, f'configs/{name}_<depth>.py', 'its configs', f"variants.py's row {name!r} has no config")
            for name in table if name not in have]
    return out


@functools.lru_cache(maxsize=None)
def resolved_config(f):
    """config.parse_config of configs/f, once (its callers only read it)."""
    import contextlib
    import io

    import config
    with contextlib.redirect_stdout(io.StringIO()):  # base_shakespeare_char.py's CPU note
        return config.parse_config([os.path.join(ROOT, 'configs', f)])


def the_places():
    """Every check of the page's places on the files as they are: [] once a variant is complete."""
    flags, configs = model_flags(), os.listdir(os.path.join(ROOT, 'configs'))
    return (untested(flags, read('tests/test_model.py')) + undocumented(flags, read('docs/config.md'))
            + rows_and_configs(configs, variants.VARIANTS, resolved_config))


def test_every_variant_has_its_places():
    """docs/adding_a_variant.md's checked places, each failure naming its file, the place and the page's step: a
    config without its row in variants.py (3), a config without its row's flags or a row without configs (4), a flag
    or value without a row in docs/config.md (5) or without the reference's math (6)."""
    flags = model_flags()
    assert {'attn', 'symmetric', 'gate', 'softmax1', 'leak', 'lambda_init_depth_offset'} <= set(flags)
    assert {'diff', 'diffv2', 'cosine'} <= set(flags['attn'])
    problems = the_places()
    assert problems == [], 'the places to mend:\n' + '\n'.join(problems)


def test_the_made_up_name_is_no_real_one():
    """The self-tests below add MADE_UP to copies of the files; no real flag, value, config or variant may be named so
    (a real one would make them fail once it was complete, as `qk_norm` did when the page's own example was added)."""
    flags = model_flags()
    names = set(flags) | {v for values in flags.values() for v in values if isinstance(v, str)} | set(variants.VARIANTS)
    names |= {f.rsplit('_', 1)[0] for f in os.listdir(os.path.join(ROOT, 'configs'))}
    assert not [n for n in names if n.startswith(MADE_UP)]


def made_up(problems):
    """The problems about MADE_UP: a self-test's own, whatever else a variant being added still lacks."""
    return [p for p in problems if MADE_UP in p]


def test_the_variant_checks_catch_a_flag_added_without_its_places():
    """A flag as a variant first goes in: a field and a forward, no reference math, no docs row; each failure names
    the file to mend and the page's step, and each place once written clears its failure."""
    tests, config_md, flag = read('tests/test_model.py'), read('docs/config.md'), MADE_UP
    flags = dict(model_flags(), **{flag: ()})
    assert made_up(untested(flags, tests + f'\ndef test_{flag}_builds():\n    make({flag}=True)\n')) == [
        f"tests/test_model.py, ref_attention() (or ref_norm(), ref_mlp(), ref_logits()): no test of model.py's {flag} "
        f"math: the reference must read cfg.{flag} and a test set {flag}=... ({PAGE}, step 6)"]
    assert made_up(undocumented(flags, config_md)) == [
        f'docs/config.md, the "Model keys" table: no row for `{flag}` ({PAGE}, step 5)']
    tested = tests.replace('def ref_norm(norm, x, cfg):', f'def ref_norm(norm, x, cfg):\n    cfg.{flag}', 1)
    assert made_up(untested(flags, tested + f'\nGRID += [dict({flag}=True)]\n')) == []
    assert made_up(undocumented(flags, config_md.replace('| `symmetric` |', f'| `{flag}` | |\n| `symmetric` |'))) == []
    # a docs row lost, a leak value without its own test
    assert f'docs/config.md, the "Model keys" table: no row for `softmax1` ({PAGE}, step 5)' in \
        undocumented(model_flags(), config_md.replace('| `softmax1` |', '| softmax-1 |'))
    renamed = tests.replace('def test_off_by_one_', 'def test_next_key_')
    assert any("no test of model.py's leak math" in m for m in untested(model_flags(), renamed))


def test_the_variant_checks_catch_a_new_value_of_an_existing_flag():
    """The page's example, a new value of attn (attn='sigmoid' there; MADE_UP here) for a new variant: model.py's
    CHOICES holds it, and until the reference computes it (step 6), docs/config.md's attn row names it (5),
    variants.py has the variant's row (3) and its configs set it (4), each check names what is missing; each place
    once written clears its failure."""
    tests, config_md, value = read('tests/test_model.py'), read('docs/config.md'), MADE_UP
    flags = model_flags()
    flags['attn'] += (value,)
    assert made_up(untested(flags, tests)) == [
        f"tests/test_model.py, ref_attention() (or ref_norm(), ref_mlp(), ref_logits()): no math for attn={value!r}: "
        f"the reference must compute it (cfg.attn == {value!r}) ({PAGE}, step 6)"]
    assert made_up(undocumented(flags, config_md)) == [
        f"docs/config.md, the \"Model keys\" table: the row of `attn` does not name {value!r} ({PAGE}, step 5)"]
    tested = tests + f"\ndef ref_{value}(q, k, cfg):\n    return torch.sigmoid(q @ k.T) if cfg.attn == {value!r} else None\n"
    assert made_up(untested(flags, tested)) == []
    assert made_up(undocumented(flags, config_md.replace("`'cosine'` |", f"`'cosine'`, `{value!r}` |", 1))) == []
    table = dict(variants.VARIANTS, **{value: dict(label='Made up', flags=dict(attn=value), seed=False)})
    configs = os.listdir(os.path.join(ROOT, 'configs'))
    assert made_up(rows_and_configs(configs, table, resolved_config)) == [
        place(4, f'configs/{value}_<depth>.py', 'its configs', f"variants.py's row {value!r} has no config")]
    mine = {f'{value}_3L.py': dict(attn=value), f'{value}_6L.py': dict(attn='softmax')}  # 6L without variant()
    resolved = lambda f: mine.get(f) or resolved_config(f)  # noqa: E731
    assert made_up(rows_and_configs(configs + list(mine), table, resolved)) == [
        place(4, f'configs/{value}_6L.py', 'its flags', f"resolves attn otherwise than variants.py's row {value!r}: "
              f"write variant({value!r})")]
    assert made_up(rows_and_configs(configs + list(mine), variants.VARIANTS, resolved)) == [
        place(3, 'variants.py', 'VARIANTS', f"no row for {value}, which configs/{value}_<depth>.py is")]


def test_every_variant_config_has_a_row_and_its_flags():
    """A config of a setting's prefix (llama_, bb_, nd_, pc_) finds its row without one of its own; one without a
    row is named, and so is a real config whose flags are not its row's."""
    configs = os.listdir(os.path.join(ROOT, 'configs'))
    missing = made_up(rows_and_configs(configs + [f'llama_{MADE_UP}_6L.py'], variants.VARIANTS, resolved_config))
    assert missing == [place(3, 'variants.py', 'VARIANTS', f"no row for llama_{MADE_UP}, which "
                             f"configs/llama_{MADE_UP}_<depth>.py is")]
    fewer = {k: v for k, v in variants.VARIANTS.items() if k != 'gated_headwise'}
    stems = [m.split('no row for ')[1].split(',')[0] for m in rows_and_configs(configs, fewer, resolved_config)]
    assert 'bb_gated_headwise' in stems and 'gated' not in stems
    moved = dict(variants.VARIANTS, sym=dict(variants.VARIANTS['sym'], flags=dict(symmetric=False)))
    assert place(4, 'configs/sym_3L.py', 'its flags', "resolves symmetric otherwise than variants.py's row 'sym': "
                 "write variant('sym')") in rows_and_configs(configs, moved, resolved_config)


def steps(page):
    """(number, heading) of each numbered step of the page, in its order."""
    return [(int(n), h) for n, h in re.findall(r'^(\d+)\. \*\*(.+?)\*\*', page, re.M)]


def test_each_check_points_at_the_step_for_its_file():
    """docs/adding_a_variant.md's steps are numbered in order, and every step a check's failure names is the step for
    that file: a failure sends its reader to the step that mends it."""
    found = steps(read(PAGE))
    assert [n for n, _ in found] == list(range(1, len(found) + 1)), found
    heading = dict(found)
    for step, file in ((3, 'variants.py'), (4, 'configs/<name>_<depth>.py'), (5, 'docs/config.md'),
                       (6, 'tests/test_model.py')):
        assert f'`{file}`' in heading[step], (step, file, heading[step])


def test_a_config_takes_its_flags_from_its_row(tmp_path):
    """variant('<name>') in a config file sets the row's flags (every depth's file writes them once, in variants.py);
    a name without a row is one line naming the file, the line and the rows there are."""
    import config
    assert resolved_config('diff_sym_6L.py')['attn'] == 'diff' and resolved_config('diff_sym_6L.py')['symmetric']
    assert resolved_config('diff_sym_6L.py')['lambda_init_depth_offset'] == 1
    (tmp_path / 'cell.py').write_text("n_layer = 2\nvariant('dif_sym')\n")
    with pytest.raises(ValueError, match=r"cell\.py, line 2: .*variant\('dif_sym'\): variants\.py's VARIANTS has no "
                                         r"such row \(it has nanogpt, diff, "):
        config.parse_config([str(tmp_path / 'cell.py')])
