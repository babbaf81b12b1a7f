"""Every findings page is rendered and checked, or is prose that states no result: each Markdown file git tracks under
results/ and docs/, and the front page ('README.md'), is either a page a renderer writes from the committed runs and
a test compares byte for byte (claims.py's, evidence/pages.py's PAGES, report.py's results.md of each sweep,
analyze.py's pages of a folder's runs), or a prose page named in PROSE with its reason, whose text a lint keeps free
of typed results.
analyze.py's pages are checked here: each is its render, a hand-edited digit fails --check, and a changed run file
changes the page. Reads files only: no training."""
import ast
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'evidence'))  # claims.py, pages.py, as tests/test_pages.py imports them
import analyze  # noqa: E402
import claims  # noqa: E402
import pages  # noqa: E402
import report  # noqa: E402
from test_report import rerender_matches, sweep_folders  # noqa: E402  how test_report.py re-renders a sweep

# Pages that state no result of this repository's runs, each with why; the lint below reads them (of 'README.md', the
# text outside README's "What we found" block, which claims.py renders and tests/test_report.py checks)
PROSE = {
    'README.md': 'the front page: what each part does and how to run it; its findings block is claims.py\'s render',
    'docs/details.md': 'how each part is built and what it measures; for results it points to the rendered pages',
    'docs/config.md': 'every config key, its default and its meaning: settings, not results',
    'docs/adding_a_variant.md': 'a recipe: the places a new variant goes',
    'docs/seed_notes.md': 'the seed notes\' own numbers, quoted as the notes give them: not this repository\'s runs',
    'docs/anchors.md': 'numbers others published, each with its source: not this repository\'s runs',
}
# Prose pages whose every number is a citation (of the seed notes, of papers): the lint reads them for counts of
# runs only, since their decimals and metrics are the sources' own
CITATIONS = {'docs/seed_notes.md', 'docs/anchors.md'}


def tracked_files(*patterns):
    """The files git tracks (a fresh clone's) by pathspec."""
    try:
        out = subprocess.run(['git', 'ls-files', '-z', '--', *patterns], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip('not a git checkout')
    return sorted(p for p in out.split('\0') if p)


def tracked_pages():
    """'README.md' and every Markdown file git tracks under results/ and docs/."""
    return tracked_files('README.md', 'results/*.md', 'docs/*.md')


def report_folders():
    """The folders under results/ with a results.md beside run folders (<variant>_<depth>_s<seed>, finished or not):
    report.py's pages."""
    return sorted(d for d, dirs, files in os.walk(os.path.join(ROOT, 'results'))
                  if 'results.md' in files and any(report.RUN_RE.match(name) for name in dirs))


def rendered(paths):
    """The pages among paths that a renderer writes and a test compares byte for byte: claims.py's results/claims.md
    (tests/test_report.py), pages.PAGES and the GPU checks' results.md, evidence/bench_gpu.py's render of the
    results.json beside each (pages.records(); tests/test_pages.py), report.py's results.md of every folder with run
    folders (tests/test_report.py for finished runs, the test below for the rest) and analyze.py's pages of a
    folder's runs (here)."""
    found = {os.path.relpath(claims.CLAIMS_MD, ROOT)} | set(pages.PAGES) | set(pages.records())
    found |= {os.path.relpath(os.path.join(f, 'results.md'), ROOT) for f in report_folders()}
    found |= {p for p in paths for name, _ in analyze.RUN_PAGES.values()
              if p.startswith('results/') and os.path.basename(p) == name}
    return found & set(paths)


def unclassified(paths):
    """The pages among paths that are neither rendered and checked nor named prose, each with how to fix it."""
    known = rendered(paths) | set(PROSE)
    return [f'{p}: neither a rendered page nor a named prose page. Render it from the committed runs (a template in '
            f'evidence/pages/ listed in pages.PAGES, or a renderer whose test compares it byte for byte), or, where it '
            f'states no result of this repository\'s runs, add it to PROSE in tests/test_findings_pages.py with the '
            f'reason' for p in paths if p not in known]


def test_every_findings_page_is_rendered_or_named_prose():
    paths = tracked_pages()
    missing = unclassified(paths)
    assert not missing, '\n'.join(missing)
    assert not rendered(paths) & set(PROSE), 'a page is both rendered and named prose: keep it in one'
    gone = sorted(set(PROSE) - set(paths))
    assert not gone, f'PROSE names {gone}, which git does not track: remove the entry'


def test_sweeps_of_unfinished_runs_rerender_byte_for_byte(tmp_path, monkeypatch):
    """The results.md of a folder whose runs have not finished (a log.jsonl, no summary.json), which
    tests/test_report.py's check of the committed sweeps passes over, is report.py's render of its run files too."""
    monkeypatch.setattr(report, 'plots', lambda data, root: [])  # results.md does not depend on the plots
    finished = sweep_folders(os.path.join(ROOT, 'results'))
    for i, folder in enumerate(f for f in report_folders() if f not in finished):
        (tmp_path / str(i)).mkdir()
        assert rerender_matches(folder, str(tmp_path / str(i))), \
            f'{os.path.relpath(folder, ROOT)}/results.md is not what report.py renders: run python report.py on it'


def test_a_new_page_without_a_renderer_or_a_reason_is_flagged():
    """A Markdown page added under results/ without a renderer or a reason is flagged, and only it; a prose page, a
    rendered page and a sweep's results.md are not."""
    new = os.path.join('results', 'a_new_measurement.md')
    assert [m.split(':')[0] for m in unclassified(tracked_pages() + [new])] == [new]
    assert unclassified(['docs/details.md', 'results/claims.md', 'results/shakespeare_cpu_long/results.md']) == []


# ----------------------------------------------------------------------------- the lint of the prose

# Every text a reader takes for prose that states no result: the prose pages above, and the templates of the rendered
# pages outside their {{ fields }} (a template's numbers are its fields, each a table on a line of its own)
TEMPLATES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'evidence', 'pages', '*.in')))
# Pages whose numbers are quotes (of the seed notes, of papers): their quotes stand in quote blocks ('> '), which the
# lint leaves alone there; anything else on them is linted as on any page
CITATIONS = {'docs/seed_notes.md', 'docs/anchors.md'}

NUM = r'[−+-]?\d+(?:\.\d+)?'
WORDS = ('two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|sixty|seventy|'
         'eighty|ninety|hundred')
COUNT = rf'(?:\d+|{WORDS}|one|no|none|zero)'
UNITS = r'(?:seeds?|runs?|variants?|models?|cells?|trials?)'
METRIC = (r'(?:val(?:idation)?(?: loss)?|train(?:ing)?(?: step)? loss|loss(?:es)?|perplexity|ppl|accuracy|kurtosis|'
          r'MFU|TFLOP/s|tokens/s|first-token attention|λ_full|lambda_full|answer share|p)')
# What a typed result looks like in prose, in every form the audit at a570e70 typed one
TYPED = {
    'a number beside a metric word': (
        rf'\b{METRIC}(?: (?:of|at|is|=|near|to|below|above|under|over|about|around|reaches|ends at|falls to|rises to|'
        rf'stays at|was|were|went to)| ?[=<>≈~])? ?{NUM}(?!\w|\.\d)'
        rf'|(?<![\w.]){NUM} ?(?:ms(?:/step)?|tokens/s|TFLOP/s|GB/s|TB/s|s/step|MFU|(?:val(?:idation)? |train(?:ing)? )?loss)\b'),
    'a decimal with 3 or more digits after the point (a loss, a metric)': r'(?<![\w.])[−+-]?\d+\.\d{3,}',
    'a ratio': (rf'(?<![\w.]){NUM} ?[x×](?![\w])(?! ?\d)'
                rf'|\b(?:\d+(?:\.\d+)?|{WORDS}|one and a half) times (?:as|slower|faster|larger|smaller|more|less|'
                rf'higher|lower|longer|shorter|the)\b|\b(?:twice|thrice|half) as\b'),
    'a percentage': rf'{NUM} ?%|\b(?:\d+(?:\.\d+)?|{WORDS})(?:[ -](?:one|two|three|four|five|six|seven|eight|nine))? ?'
                    r'per ?cent\b',
    'a range': (r'(?<![\w.])[−+]?\d+\.\d+ ?(?:[–-]|to) ?[−+-]?\d+(?:\.\d+)?(?!\w|\.\d)'
                r'|(?<![\w.])[−+]?\d+ ?(?:[–-]|to) ?[−+-]?\d+\.\d+(?!\w|\.\d)'
                rf'|\b(?:between|from) {NUM} (?:and|to) {NUM}(?!\w|\.\d)|\bseeds? \d+ ?[–-] ?\d+'),
    'a count of seeds or runs': (
        rf'\b{COUNT} (?:out )?of (?:the |its |their )?(?:{COUNT} )?{UNITS}\b|(?<![\w.])\d+ of \d+(?!\w|\.\d)'
        rf'|\b(?:each|every|all|both) of the {COUNT} {UNITS}\b'
        rf'|\b(?:in|for|across|on|of|over) (?:every|each|all(?: the)?) (?:{COUNT} )?(?:seeds?|runs?)\b(?! folder)'
        rf'|\ball (?:the )?{COUNT} {UNITS}\b|\b(?:in|on|for|over|across|with|from) {COUNT} (?:of (?:the|its) )?'
        rf'(?:seeds|runs)\b'),
    'a table row': r'^ {0,3}\|.*(?:\d\.\d|±|%).*\|\s*$',  # a row with a decimal, a ± or a percentage
}

# Numbers and phrases a prose page states that the lint would take for results, each with where it comes from; a
# formula's value is computed here, so that a changed formula or a mistyped digit fails. A match passes only where
# every number in it is allowed (so a range whose first number is allowed still fails on its second)
ALLOWED = {'95%': 'the confidence level of every interval (report.py), a setting, not a result'}


def uniform_first_token(T):
    """Uniform weights' first-token attention under the causal mask: query t gives 1/(t + 1) to token 0, averaged over
    queries 1..T-1 (analyze.uniform_first_token's reference, in closed form)."""
    return sum(1 / (t + 1) for t in range(1, T)) / (T - 1)


NOT_RESULTS = {
    'docs/details.md': {
        f'{round(0.2 * 2 ** 16) / 2 ** 16:.7f}': "dropout's p = 0.2 rounded to a multiple of 2^-16 (model.Dropout)",
        f'{uniform_first_token(256):.3f}': "uniform weights' first-token attention at T = 256 under the causal mask",
    },
}


def prose(text, page=''):
    """The text a reader takes for prose: without code blocks, `code` (which may run over a line break), HTML
    comments, a template's {{ fields }}, the README's rendered blocks (claims.py's findings, pages.py's quick start), and, on a citation
    page, its quote blocks. The lines keep their numbers."""
    if page in CITATIONS:
        text = re.sub(r'^>.*$', '', text, flags=re.M)
    for pattern in (r'<!-- (\w+):start -->.*?<!-- \1:end -->', r'```.*?```', r'<!--.*?-->', r'\{\{.*?\}\}',
                    r'`[^`]*`'):
        text = re.sub(pattern, lambda m: '\n' * m[0].count('\n'), text, flags=re.S)
    return text


def typed_results(text, allowed=(), page=''):
    """(line, kind, match) of each form of TYPED in the prose of text, but for matches whose every number (or the
    whole match) is allowed."""
    found, text = [], prose(text, page)
    allowed = set(allowed) | set(ALLOWED)
    for kind, pattern in TYPED.items():
        for m in re.finditer(pattern, text, re.I | re.M):
            numbers = re.findall(r'[−+-]?\d+(?:\.\d+)?%?', m[0])
            ok = m[0] in allowed or (numbers and all(n in allowed or n.lstrip('−+-') in allowed for n in numbers))
            if not ok:
                found.append((text.count('\n', 0, m.start()) + 1, kind, m[0].strip()))
    return sorted(found)


def read(page):
    with open(os.path.join(ROOT, page), encoding='utf-8') as f:
        return f.read()


@pytest.mark.parametrize('page', sorted(PROSE) + TEMPLATES)
def test_prose_types_no_result(page):
    text = read(page)
    if page == 'README.md':
        assert text.count('<!-- findings:start -->') == 1 and text.count('<!-- findings:end -->') == 1
    found = typed_results(text, NOT_RESULTS.get(page, {}), page)
    assert not found, (f'{page} types what looks like a result of runs: '
                       + '; '.join(f'line {line}: {what!r} ({kind})' for line, kind, what in found)
                       + '. Render it from the runs (a table of evidence/pages.py) and point there, or, where it is '
                         'a formula or a citation, add it to NOT_RESULTS with where it comes from (a quote on '
                         'docs/seed_notes.md or docs/anchors.md goes in a quote block)')


# Results typed in each form the audit typed them, every one of which passed the lint at a570e70
INSERTED = {
    'a number beside a metric word': ['nanogpt, Diff and Sym fall to val 0.35 within a few hundred steps',
                                      'Norm+Sym is the worst (val loss 1.63)', 'a peak of 0.43 TFLOP/s',
                                      'its accuracy is 0.61'],
    'a decimal with 3 or more digits after the point (a loss, a metric)': ['the baseline ends at 1.988'],
    'a ratio': ['Diff trained 1.7x slower in bf16', 'the gated step is 1.66× the baseline\'s',
                'Diff is three times slower', 'Softmax-1 is twice as fast'],
    'a percentage': ['softmax-1 lowers first-token attention by 84%', 'the sink falls 95 percent',
                     'a change of −90% in kurtosis', 'a sink in ninety-five percent of the heads'],
    'a range': ['the causal row ends at 1.96–2.33', 'Diff+Sym sits between 0.2 and 0.9',
                'in seeds 1-5 the sink stays'],
    'a count of seeds or runs': ['softmax-1 still has a sink in four out of five seeds', 'each of the seven seeds agree',
                                 'a sink in 5 of 7 seeds', 'it holds in every seed', 'all three runs agree',
                                 'the gate empties it in 2 seeds'],
    'a table row': ['\n\n| nanogpt | 1.66 | 0.4 |\n\n'],
}


@pytest.mark.parametrize('form', list(INSERTED))
@pytest.mark.parametrize('page', sorted(PROSE) + TEMPLATES)
def test_the_lint_catches_a_result_typed_into_the_page(page, form):
    """Each form of typed result, inserted into the page's prose, is caught on the line it was put on; the same in
    `code` is not. The range's first number is allowed here, as a page may allow a number: its second still fails."""
    text = read(page)
    allowed = set(NOT_RESULTS.get(page, {})) | {'0.2', '1.96'}
    assert typed_results(text, allowed, page) == []
    for typed in INSERTED[form]:
        edited = text.rstrip('\n') + f'\n\nIn short, {typed}.\n'
        line = edited.rstrip('\n').count('\n') + 1 - (typed.count('\n') - typed.lstrip('\n').count('\n') > 0) * 0
        found = typed_results(edited, allowed, page)
        assert any(kind == form for _, kind, _ in found), (page, typed, found)
        assert all(at > text.rstrip('\n').count('\n') for at, _, _ in found), (page, typed, found)
        if '\n' not in typed:
            assert typed_results(text.rstrip('\n') + f'\n\nIn short, `{typed}`.\n', allowed, page) == []


def test_the_lint_passes_settings_splits_and_citations():
    """What the prose states that is not a result: settings, a split, a quote on a citation page, a formula's value."""
    for text in ('500 steps at lr 1e-3, dropout 0.2, 3L', 'the held-out last part of tiny Shakespeare',
                 'a 95% interval', 'one of the `--k` (3) most', 'weights of the lowest val loss', '```\nval 0.014\n```',
                 'the gate (G1) and softmax-1', '| flag | `0.2` |'):
        assert typed_results(text) == [], text
    assert typed_results("> Kaul et al.'s 98% of heads", page='docs/anchors.md') == []
    assert typed_results("> Kaul et al.'s 98% of heads", page='docs/details.md') != []
    assert typed_results('p is rounded: 0.1999969', NOT_RESULTS['docs/details.md']) == []
    assert typed_results('p is rounded: 0.1999968', NOT_RESULTS['docs/details.md']) != []


@pytest.mark.parametrize('page', TEMPLATES)
def test_a_template_types_no_decimal(page):
    """A template's prose states no number at all (its numbers are its tables): a bare decimal typed into it, with
    no metric word beside it, is caught too."""
    decimals = lambda text: re.findall(r'(?<![\w.])\d+\.\d+', prose(text, page))  # noqa: E731
    text = read(page)
    assert decimals(text) == [], page
    assert decimals(text + '\nThe gap is 0.35 here.\n') == ['0.35']


def test_a_templates_numbers_are_tables_on_lines_of_their_own():
    """Every {{ field }} of a template is a line of its own, so a template's prose states no rendered number either:
    the numbers of a rendered page are in its tables."""
    for page in TEMPLATES:
        for i, line in enumerate(read(page).split('\n'), 1):
            if '{{' in line:
                assert re.fullmatch(r'\{\{.+?\}\}', line.strip()), f'{page}, line {i}: a field inside prose: {line!r}'


# ----------------------------------------------------------------------------- the lint of code comments

# A measured number in a comment or docstring of the repository's code (.py files and shell scripts) cites where it
# was measured: a results/... file or a commit (7 or more hex digits) in the same comment (a run of consecutive
# comment lines) or docstring. A measured number is one beside a unit or a metric word (CODE_NUMBER); it is none
# where it is a quote ('9s': a format's example), a constant of the file's code (the setting the comment describes),
# a paper's (the comment names its source: et al., docs/anchors.md, docs/seed_notes.md) or ALLOWED's.
UNIT = (r'(?:ms|µs|s|sec|seconds?|min|minutes?|hours?|%|[KMGT]i?B|[GT]B/s|TFLOP/s|TFLOPS|steps/s|it/s|tokens/s|'
        r'ms/step|s/step|ms/iter)')
CODE_NUMBER = re.compile(
    rf'(?<![\w.^/-])\d+(?:\.\d+)?(?: ?{UNIT}(?![\w/])|[x×](?![\w]))'  # a time, a size, a share, a ratio
    r'|\b\d+[hm] \d+[ms]\b'  # a duration as output.duration writes it
    r'|\b(?:val(?:idation)?(?: loss)?|train(?:ing)? loss|loss|accuracy|kurtosis|perplexity|ppl|MFU)'
    r'(?: (?:of|at|is|was|to|from|near|about|reached))? ?[=≈~:]? ?\d+\.\d+', re.I)  # a metric's decimal
CITED = re.compile(r'results/[\w./-]+|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b|\bet al\.'
                   r'|docs/(?:anchors|seed_notes)\.md')
QUOTED = re.compile(r"(?<![\w.])'[^'\n]*'(?!\w)|`[^`\n]*`")


def code_texts(path, text):
    """(line, text) of each comment (consecutive comment lines together) and docstring of a .py file or a shell
    script."""
    if path.endswith('.py'):
        comments = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]
        docs = [(n.body[0].lineno, ast.get_docstring(n, clean=False)) for n in ast.walk(ast.parse(text))
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and ast.get_docstring(n, clean=False)]
    else:  # a shell comment: a # at a line's start or after a blank, outside quotes
        unquoted = (re.sub(r"'[^']*'|\"(?:[^\"\\\\]|\\\\.)*\"", lambda m: ' ' * len(m[0]), line)
                    for line in text.split('\n'))
        comments = [(i, line[m.start(1):]) for i, (line, bare) in enumerate(zip(text.split('\n'), unquoted), 1)
                    if not line.startswith('#!') and (m := re.search(r'(?:^|\s)(#.*)$', bare))]
        docs = []
    blocks = []
    for line, c in comments:
        if blocks and blocks[-1][2] == line - 1:
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + '\n' + c, line)
        else:
            blocks.append((line, c, line))
    return [(line, c) for line, c, _ in blocks] + docs


def code_constants(path, text):
    """The numbers a file's code holds (a .py file's numeric literals; a shell script's numbers outside comments)."""
    if not path.endswith('.py'):
        return {float(x) for line in text.split('\n') for x in re.findall(r'\d+(?:\.\d+)?', line.split(' #')[0])
                if not line.lstrip().startswith('#')}
    return {float(n.value) for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant)
            and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)}


def untraced_numbers(path, text):
    """(line, match) of each measured number in the file's comments and docstrings that cites no results file or
    commit, but for quotes, the file's own constants and ALLOWED's settings."""
    consts = code_constants(path, text)
    found = []
    for line, t in code_texts(path, text):
        if CITED.search(t):
            continue
        for m in CODE_NUMBER.finditer(QUOTED.sub("''", t)):
            n = float(re.search(r'\d+(?:\.\d+)?', m[0])[0])
            if m[0] in ALLOWED or n in consts or (m[0].endswith('%') and n / 100 in consts):
                continue
            found.append((line, m[0]))
    return found


def test_code_comments_cite_where_their_numbers_were_measured():
    """Every measured number in a comment or docstring of the repository's .py files and shell scripts cites its
    results file or commit (the audit typed a result into a docstring, and every check passed)."""
    found = [(p, line, what) for p in tracked_files('*.py', '*.sh') for line, what in untraced_numbers(p, read(p))]
    assert not found, 'a measured number without its source: ' + '; '.join(
        f'{p}, the comment or docstring at line {line}: {what!r}' for p, line, what in found) + \
        '. Cite the results/... file or the commit that measured it in the same comment, or drop the number'


# Results typed into code the way the audit typed one into a docstring, each caught; and what is not a measurement
TYPED_IN_CODE = ['"""Diff trains 1.7x slower in bf16 on this CPU."""', '# a 6-layer run took 7 minutes',
                 '# Norm+Sym reaches a val loss of 1.63', '"""The step takes 8.44 ms, 23% of the peak."""',
                 '# the sweep took 7m 19s']
NOT_MEASURED = ['"""Diff trains 1.7x slower (results/bench_cpu.md)."""', '# took 7 minutes at a570e70',
                "# formats 75 as '1m 15s'", 'RATIO = 1.5  # a spike: a loss above 1.5x the median',
                '# a step of 12 x 1024 tokens', "# Sun et al.'s massive activations are ~1000x the median"]


@pytest.mark.parametrize('typed', TYPED_IN_CODE)
def test_the_comment_lint_catches_a_result_typed_into_code(typed):
    source = f'def f():\n    {typed}\n    return 0\n'
    assert untraced_numbers('a.py', source), typed
    assert untraced_numbers('a.sh', f'#!/bin/bash\n{typed}\necho "# not a comment"\n') or typed.startswith('"""')
    assert untraced_numbers('a.py', f'def f():\n    return {typed.strip("#").strip()!r}\n') == []  # code, not a comment


@pytest.mark.parametrize('path', ['report.py', 'evidence/claims.py', 'ablate.sh'])
def test_the_comment_lint_catches_a_result_typed_into_a_repository_file(path):
    """A measured number typed into a comment of a committed file is caught at the comment's line."""
    text = read(path)
    assert untraced_numbers(path, text) == []
    edited = text.rstrip('\n') + '\n\n# nanogpt trains 1.7x faster than Diff here\n'
    assert untraced_numbers(path, edited) == [(edited.count('\n'), '1.7x')]


@pytest.mark.parametrize('fine', NOT_MEASURED)
def test_the_comment_lint_passes_citations_settings_and_quotes(fine):
    assert untraced_numbers('a.py', f'def f():\n    {fine}\n    return 0\n') == [], fine


# ----------------------------------------------------------------------------- analyze.py's pages of a folder's runs

def run_pages():
    """(flag, folder) of each tracked page analyze.py renders from a folder's runs."""
    return [(flag, os.path.dirname(p)) for p in tracked_pages() for flag, (name, _) in analyze.RUN_PAGES.items()
            if p.startswith('results/') and os.path.basename(p) == name]


def test_both_of_analyzes_pages_are_committed():
    assert sorted(run_pages()) == [('emergence_page', 'results/pycode_gate_cpu'),
                                   ('trajectory_page', 'results/shakespeare_full_cpu')]


@pytest.mark.parametrize('flag,folder', run_pages())
def test_run_page_is_its_render(flag, folder, capsys):
    """The committed page is its render from the committed run files, byte for byte, and --check says so."""
    name, render = analyze.RUN_PAGES[flag]
    with open(os.path.join(ROOT, folder, name), encoding='utf-8') as f:
        assert f.read() == render(os.path.join(ROOT, folder)), f'{folder}/{name}: python analyze.py --{flag} {folder}'
    analyze.main(['--check', f'--{flag}', os.path.join(ROOT, folder)])
    assert 'up to date' in capsys.readouterr().out


def copy_of(folder, tmp_path, monkeypatch):
    """The folder's text files (no images, no checkpoints) at the same place under tmp_path, with the configs the page
    names, and analyze.py's root moved there, so the copy renders as the original does."""
    shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder, ignore=shutil.ignore_patterns('*.png', '*.pt'))
    shutil.copytree(os.path.join(ROOT, 'configs'), tmp_path / 'configs')
    monkeypatch.setattr(analyze, 'HERE', str(tmp_path))
    return tmp_path / folder


def edit_a_digit(text):
    """text with the last digit of the first table cell's decimal changed (9 -> 8, else + 1)."""
    m = re.search(r'^\|[^\n]*?\d\.(\d+) \|', text, re.M)
    j = m.end(1) - 1
    return text[:j] + ('8' if text[j] == '9' else str(int(text[j]) + 1)) + text[j + 1:]


@pytest.mark.parametrize('flag,folder', run_pages())
def test_a_hand_edited_digit_fails_the_check(flag, folder, tmp_path, monkeypatch, capsys):
    copy = copy_of(folder, tmp_path, monkeypatch)
    name = analyze.RUN_PAGES[flag][0]
    analyze.main(['--check', f'--{flag}', str(copy)])  # the copy as committed: up to date
    page = copy / name
    page.write_text(edit_a_digit(page.read_text(encoding='utf-8')), encoding='utf-8')
    with pytest.raises(SystemExit, match=f'{name} differs from its render: run python analyze.py --{flag}'):
        analyze.main(['--check', f'--{flag}', str(copy)])


def test_a_changed_snapshot_changes_the_trajectory(tmp_path, monkeypatch):
    """sink_trajectory.md reads the snapshots: one layer's first-token attention changed changes that row's cell."""
    copy = copy_of('results/shakespeare_full_cpu', tmp_path, monkeypatch)
    path = copy / 'sink_trajectory' / 'nanogpt_3L_s1_iter1000.json'
    a = json.loads(path.read_text())
    before = analyze.trajectory_page(str(copy))
    a['layers'][1]['first_token_attention'] = 0.5
    path.write_text(json.dumps(a))
    after = analyze.trajectory_page(str(copy))
    assert f"| 1000 | {a['layers'][0]['first_token_attention']:.4f} | 0.5000 |" in after
    assert '| 0.5000 |' not in before


def test_a_changed_summary_changes_the_gate_page(tmp_path, monkeypatch):
    """emergence.md reads summary.json: a changed final val loss is the page's, in loss and in bits a byte."""
    copy = copy_of('results/pycode_gate_cpu', tmp_path, monkeypatch)
    path = copy / os.path.basename(analyze.gate_run(str(copy))) / 'summary.json'
    s = json.loads(path.read_text())
    s['final_val_loss'] = 1.2345
    path.write_text(json.dumps(s))
    assert 'final val loss 1.2345 (bytes: 1.781 bits a byte)' in analyze.emergence_page(str(copy))


def test_the_trajectory_refuses_snapshots_measured_differently(tmp_path, monkeypatch):
    """Snapshots analysed on other settings would not make one table: the page names the setting."""
    copy = copy_of('results/shakespeare_full_cpu', tmp_path, monkeypatch)
    path = copy / 'sink_trajectory' / 'softmax1_3L_s1_iter0500.json'
    a = json.loads(path.read_text())
    a['eval_iters'] = 20
    path.write_text(json.dumps(a))
    with pytest.raises(ValueError, match=r'the snapshots differ in eval_iters \(\[10, 20\]\)'):
        analyze.trajectory_page(str(copy))
