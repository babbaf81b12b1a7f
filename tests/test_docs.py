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
SELF = 'tests/test_docs.py'  # left out of the scans: its examples of what they catch are stale on purpose
sys.path.insert(0, ROOT)
import sweep as sweep_py  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, 'evidence'))


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
# README on its own: a pointer that names no section, which a moved section leaves stale unnoticed. Another
# project's README ("microsoft/unilm's README") is a citation, not a pointer
# README as a word in prose (not a name such as README_MD, nor the path 'README.md' in quotes, which code opens)
BARE_README = re.compile(r'(?<![\w/.\'"-])(?<![\w/.-]\'s )README(?!\w)(?!(?:\.md)?(?:\'s|,)\s+(?:#\s*)?\\?")')


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
    found = [(p, ref) for p in tracked('*.py', '*.sh', '*.md', '.ci/*') if p != SELF
             for ref in internal_references(read(p))]
    assert found == []
    assert internal_references('files before session 8 lack them; fails without its fix (issue 31); (#28); '
                               'issue #27') == ['session 8', 'issue 31', '(#28)', 'issue #27']
    assert internal_references('microsoft/unilm issue 1663; a pytest session starts; commit 1d93be1') == []


# ----------------------------------------------------------------------------- a variant's places

PAGE = 'docs/adding_a_variant.md'
# the self-tests' flag and variant: no real one may take the name (test_the_made_up_name_is_no_real_one), so the
# self-tests keep passing once a variant of any name is added by the page
MADE_UP = 'made_up_flag'
NANOGPT_SHAPE = {'block_size', 'vocab_size', 'n_layer', 'n_head', 'n_embd', 'dropout', 'bias'}  # not attention


def model_flags(source):
    """GPTConfig's fields that choose the model's math (all but nanoGPT's shape), and the values model.py allows for
    each (its __post_init__ choices), from model.py's text: no torch import."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == 'GPTConfig')
    fields = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)]
    choices = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and [getattr(t, 'id', None) for t in node.targets] == ['choices']:
            choices = {k.arg: ast.literal_eval(k.value) for k in node.value.keywords}
    return {f: choices.get(f, ()) for f in fields if f not in NANOGPT_SHAPE}


def switches(source):
    """The flags that switch a variant on (a bool, or a choice among named values), not a number that tunes one
    (lambda_init_depth_offset): the flags a variant's row names in the README, details.md and bench.py."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == 'GPTConfig')
    bools = {s.target.id for s in cls.body
             if isinstance(s, ast.AnnAssign) and getattr(s.annotation, 'id', '') == 'bool'}
    return {f for f, values in model_flags(source).items() if values or f in bools}


def place(step, file, where, what):
    """A failure as the page's step says to mend it: the file, the place in it, what is missing."""
    return f"{file}, {where}: {what} ({PAGE}, step {step})"


def reference_reads(source):
    """The attributes that tests/test_model.py's reference model (ref_*, expected_*, dims) reads: the flags whose
    math it computes from the papers' formulas."""
    return {a.attr for f in ast.parse(source).body
            if isinstance(f, ast.FunctionDef) and f.name.startswith(('ref_', 'expected_', 'dims'))
            for a in ast.walk(f) if isinstance(a, ast.Attribute)}


def untested_flags(model_source, test_source):
    """The flags without a test of their math: the reference reads the flag and a test sets it (flag=...), or each
    of its values but the default has a test named after it (leak's bugs, each checked against its own formula)."""
    reads = reference_reads(test_source)
    tests = re.findall(r'^def (test_\w+)', test_source, re.M)
    out = []
    for flag, values in model_flags(model_source).items():
        by_reference = flag in reads and re.search(rf'\b{flag}=', test_source)
        by_name = values[1:] and all(any(v in t for t in tests) for v in values[1:])
        if not (by_reference or by_name):
            out.append(place(5, 'tests/test_model.py', 'ref_attention() (or ref_norm(), ref_mlp(), ref_logits()) and '
                             '_grid(), FULL or MAPS', f"no test of model.py's {flag} math: the reference must read "
                             f"cfg.{flag} and a test set {flag}=..."))
    return out


def undocumented_flags(model_source, config_md):
    """The flags without a row of docs/config.md's model-key table (a row may name several: `norm`, `mlp`, ...)."""
    table = config_md.split('## Model keys')[1].split('\n## ')[0]
    named = {n for row in table.splitlines() if row.startswith('|') for n in re.findall(r'`(\w+)`', row.split('|')[1])}
    return [place(7, 'docs/config.md', 'the "Model keys" table', f"no row for `{f}`")
            for f in model_flags(model_source) if f not in named]


def variant_configs(config_names):
    """{config file: its text's assignments} of each variant's configs/<name>_<depth>.py (not the llama_/bb_/nd_/pc_
    copies, which set the same flags), read as text; with or without its row in sweep.py."""
    out = {}
    for f in sorted(config_names):
        m = re.fullmatch(r'(\w+)_(\d+[LM])\.py', f)
        if m and not m[1].startswith(tuple(sweep_py.PREFIXES)):
            tree = ast.parse(read(os.path.join('configs', f)))
            out[f'configs/{f}'] = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                                   if isinstance(t, ast.Name)}
    return out


def swept_switches(model_source, configs):
    """{flag: the first config that sets it} of the switches (switches()) that a variant's configs set."""
    flags = switches(model_source)
    out = {}
    for cfg, keys in configs.items():
        for k in sorted(keys & flags):
            out.setdefault(k, cfg)
    return out


def section(text, heading):
    """The text of a markdown section, from its heading to the next heading of its level or above."""
    m = re.search(rf'^(#+) {re.escape(heading)}.*$', text, re.M)
    if not m:
        return ''
    end = re.search(rf'^#{{1,{len(m[1])}}} ', text[m.end():], re.M)
    return text[m.end():m.end() + end.start() if end else len(text)]


def in_code(flag, text):
    """Whether text names flag inside `code` (`qk_norm=True`, `attn='diff', symmetric=True`)."""
    return any(re.search(rf'\b{flag}\b', span) for span in re.findall(r'`([^`\n]+)`', text))


def unnamed_switches(model_source, configs, readme, details, bench):
    """Each switch a variant's config sets that the README's variant table, docs/details.md's "Attention" section or
    bench.py's VARIANTS does not name: a reader of the table, of how it runs and of the benchmark would not find it."""
    table = section(readme, 'Attention variants')
    how = section(details, 'Attention: how the variants are computed')
    benched = {k.arg for n in ast.walk(ast.parse(bench)) if isinstance(n, ast.Assign)
               and [getattr(t, 'id', None) for t in n.targets] == ['VARIANTS'] for c in ast.walk(n.value)
               if isinstance(c, ast.Call) for k in c.keywords}
    out = []
    for flag, cfg in swept_switches(model_source, configs).items():
        if not in_code(flag, table):
            out.append(place(8, 'README.md', 'the "Attention variants" table', f"no row names `{flag}`, which {cfg} "
                             "sets"))
        if not in_code(flag, how):
            out.append(place(9, 'docs/details.md', '"Attention: how the variants are computed"',
                             f"no line names `{flag}` (how it runs through SDPA), which {cfg} sets"))
        if flag not in benched:
            out.append(place(12, 'variants.py', 'VARIANTS', f"no entry sets {flag}, which {cfg} sets"))
    return out


def variants_without_a_row(config_names, variants):
    """The config stems configs/<stem>_<depth>.py (depth 3L, 6L, 8L, 2L, 124M, ...) that sweep.py's VARIANTS, with
    its llama_/bb_/nd_ copies, has no row for: report.py would have no label or column for their runs."""
    rows = set(sweep_py.with_prefixes([name for name, _, _ in variants]))
    stems = {m[1] for f in config_names if (m := re.fullmatch(r'(\w+)_(\d+[LM])\.py', f))}
    return [place(11, 'sweep.py', 'VARIANTS', f"no row for {stem}, which configs/{stem}_<depth>.py is")
            for stem in sorted(stems - rows)]


def the_places():
    """Every check of the page's places on the files as they are: [] once a variant is complete."""
    model, configs = read('model.py'), os.listdir(os.path.join(ROOT, 'configs'))
    return (untested_flags(model, read('tests/test_model.py')) + undocumented_flags(model, read('docs/config.md'))
            + unnamed_switches(model, variant_configs(configs), read('README.md'),
                               read('docs/details.md'), read('variants.py'))
            + variants_without_a_row(configs, sweep_py.VARIANTS))


def test_every_variant_has_its_places():
    """docs/adding_a_variant.md's checked places, each failure naming its file, the place and the page's step: a
    flag without a test of its math (5) or a docs/config.md row (7); a switch a variant's configs set that the
    README's table (8), docs/details.md (9) or bench.py (12) does not name; a config without a sweep.py row (11)."""
    model = read('model.py')
    assert {'attn', 'symmetric', 'gate', 'softmax1', 'leak', 'lambda_init_depth_offset'} <= set(model_flags(model))
    assert {'attn', 'symmetric', 'gate', 'softmax1', 'mask_self'} <= set(swept_switches(
        model, variant_configs(os.listdir(os.path.join(ROOT, 'configs')))))
    problems = the_places()
    assert problems == [], 'the places to mend:\n' + '\n'.join(problems)


def test_the_made_up_name_is_no_real_one():
    """The self-tests below add MADE_UP to copies of the files; no real flag, config or variant may be named so (a
    real one would make them fail once it was complete, as `qk_norm` did when the page's own example was added)."""
    names = set(model_flags(read('model.py'))) | {n for n, _, _ in sweep_py.VARIANTS}
    names |= {f.rsplit('_', 1)[0] for f in os.listdir(os.path.join(ROOT, 'configs'))}
    assert not [n for n in names if n.startswith(MADE_UP)]


def made_up(problems):
    """The problems about MADE_UP: a self-test's own, whatever else a variant being added still lacks."""
    return [p for p in problems if MADE_UP in p]


def with_made_up(model_source):
    """model.py's text with MADE_UP as a bool flag of GPTConfig."""
    field = '    symmetric: bool = False'
    return model_source.replace(field, f'    {MADE_UP}: bool = False\n{field}', 1)


def test_the_variant_checks_catch_a_flag_added_without_its_places():
    """A flag as a variant first goes in: a field and a forward, no reference math, no docs row; each failure names
    the file to mend and the page's step."""
    model, tests, config_md = read('model.py'), read('tests/test_model.py'), read('docs/config.md')
    flag = MADE_UP
    with_flag = with_made_up(model)
    assert made_up(untested_flags(with_flag, tests + f'\ndef test_{flag}_builds():\n    make({flag}=True)\n')) == [
        f"tests/test_model.py, ref_attention() (or ref_norm(), ref_mlp(), ref_logits()) and _grid(), FULL or MAPS: "
        f"no test of model.py's {flag} math: the reference must read cfg.{flag} and a test set {flag}=... "
        f"({PAGE}, step 5)"]
    assert made_up(undocumented_flags(with_flag, config_md)) == [
        f'docs/config.md, the "Model keys" table: no row for `{flag}` ({PAGE}, step 7)']
    # the reference computes it and a test sets it; a row documents it
    tested = tests.replace('def ref_norm(norm, x, cfg):', f'def ref_norm(norm, x, cfg):\n    cfg.{flag}', 1)
    assert made_up(untested_flags(with_flag, tested + f'\nGRID += [dict({flag}=True)]\n')) == []
    assert made_up(undocumented_flags(with_flag, config_md.replace('| `symmetric` |',
                                                                   f'| `{flag}` | |\n| `symmetric` |'))) == []
    # a docs row lost, a leak value without its own test
    assert f'docs/config.md, the "Model keys" table: no row for `softmax1` ({PAGE}, step 7)' in \
        undocumented_flags(model, config_md.replace('| `softmax1` |', '| softmax-1 |'))
    renamed = tests.replace('def test_off_by_one_', 'def test_next_key_')
    assert "no test of model.py's leak math" in [m.split(': ')[1] for m in untested_flags(model, renamed)]


def test_the_variant_checks_catch_a_swept_switch_the_readme_details_or_bench_lack():
    """A variant's config that sets a switch: the README's table, docs/details.md's "Attention" section and bench.py's
    VARIANTS must each name it, and each lack is named with its file, place and step; a number that tunes a variant
    (lambda_init_depth_offset) is no switch."""
    flag = MADE_UP
    model = with_made_up(read('model.py'))
    readme, details, bench = read('README.md'), read('docs/details.md'), read('variants.py')
    configs = dict(variant_configs(os.listdir(os.path.join(ROOT, 'configs'))))
    assert 'lambda_init_depth_offset' not in switches(model)
    assert made_up(unnamed_switches(model, configs, readme, details, bench)) == []
    configs[f'configs/{flag}_3L.py'] = {'n_layer', flag, 'out_dir'}
    assert made_up(unnamed_switches(model, configs, readme, details, bench)) == [
        f'README.md, the "Attention variants" table: no row names `{flag}`, which configs/{flag}_3L.py sets '
        f'({PAGE}, step 8)',
        f'docs/details.md, "Attention: how the variants are computed": no line names `{flag}` (how it runs through '
        f'SDPA), which configs/{flag}_3L.py sets ({PAGE}, step 9)',
        f'variants.py, VARIANTS: no entry sets {flag}, which configs/{flag}_3L.py sets ({PAGE}, step 12)']
    readme = readme.replace('| `softmax1` | `softmax1=True` |', f'| `{flag}` | `{flag}=True` | new |\n'
                            '| `softmax1` | `softmax1=True` |', 1)
    details = details.replace('`GPT.attention_maps(idx)`', f'`{flag}=True` runs ... `GPT.attention_maps(idx)`', 1)
    bench = bench.replace("VARIANTS = {", f"VARIANTS = {{'{flag}': dict(flags=dict({flag}=True)),", 1)
    assert made_up(unnamed_switches(model, configs, readme, details, bench)) == []


def test_every_variant_config_has_a_row_in_sweep_variants(monkeypatch):
    """docs/adding_a_variant.md, step 11: configs/<variant>_<depth>.py without a row of sweep.py's VARIANTS (or of
    its prefixed copies) fails here, and ablate.sh refuses to sweep it."""
    configs = os.listdir(os.path.join(ROOT, 'configs'))
    missing = made_up(variants_without_a_row(configs + [f'{MADE_UP}_3L.py', f'llama_{MADE_UP}_6L.py',
                                                        f'needle_{MADE_UP}.py'], sweep_py.VARIANTS))
    assert missing == [place(11, 'sweep.py', 'VARIANTS', f"no row for {stem}, which configs/{stem}_<depth>.py is")
                       for stem in (f'llama_{MADE_UP}', MADE_UP)]
    fewer = [row for row in sweep_py.VARIANTS if row[0] != 'gated_headwise']
    stems = [m.split('no row for ')[1].split(',')[0] for m in variants_without_a_row(configs, fewer)]
    assert 'bb_gated_headwise' in stems and 'gated' not in stems
    # ablate.sh's check (sweep.py check and plan) refuses a variant that has configs but no row
    monkeypatch.delitem(sweep_py.LABELS, 'gated')
    with pytest.raises(sweep_py.Refused, match="'gated', which has configs but no row in sweep.py's VARIANTS"):
        sweep_py.sweep_from_env(dict(PROFILE='cpu', VARIANTS='nanogpt gated'), [])


def steps(page):
    """(number, heading) of each numbered step of the page, in its order."""
    return [(int(n), h) for n, h in re.findall(r'^(\d+)\. \*\*(.+?)\*\*', page, re.M)]


def test_the_page_counts_its_places_and_each_check_points_at_its_step():
    """docs/adding_a_variant.md says how many places in how many files, and the count is its own steps' (it said
    "four files and eight places" over 11 steps); each step's heading names its file, and every step a check's
    failure names is the step for that file."""
    page = read(PAGE)
    found = steps(page)
    assert [n for n, _ in found] == list(range(1, len(found) + 1)), found
    files = {f for _, h in found for f in re.findall(r'`([\w/<>.-]+\.(?:py|md))`', h)}
    assert all(re.search(r'`[\w/<>.-]+\.(?:py|md)`', h) for _, h in found), found  # one file or more
    assert f"{len(found)} places in {len(files)} files" in ' '.join(page.split()), (len(found), sorted(files))
    heading = dict(found)
    for step, file in ((5, 'tests/test_model.py'), (7, 'docs/config.md'), (8, 'README.md'), (9, 'docs/details.md'),
                       (11, 'sweep.py'), (12, 'bench.py')):
        assert f'`{file}`' in heading[step], (step, file, heading[step])
