"""config.py's one rule for a refused value: every key, given an empty string, a wrong type or a negative number,
is refused by parse_config (before anything is built) with a message that names the key, the value and what to
write instead; a key where a negative number is a legal value says why below."""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import config  # noqa: E402

DIFF = ['--attn=diff']  # the Diff keys (lambda_init, its offset) apply only with attn='diff'
# keys a negative number is legal for: a string key takes '-1' as text (a folder, a project or a run name)
TEXT = [k for k in config.DEFAULTS if str in config._expected_types(k)]


def refused(*argv):
    """parse_config's refusal: its message, which is one line."""
    with pytest.raises(ValueError) as e:
        config.parse_config([*DIFF, *argv])
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    return str(e.value)


@pytest.mark.parametrize('key', sorted(config.DEFAULTS))
def test_every_key_refuses_an_empty_value_a_wrong_type_and_a_negative_number_naming_what_to_write(key):
    msg = refused(f'--{key}=')
    assert f"{key}=''" in msg and f'--{key}' in msg.split(f"{key}=''")[1], msg  # the value, then the fix
    if key not in TEXT or key in config.CHOICES:  # '[1]' is a legal name of a folder, a dataset or a run
        msg = refused(f'--{key}=[1]')  # a list; a key with choices reads it as text
        assert (f"{key}=[1]" in msg or f"{key}='[1]'" in msg) and f'write --{key}=' in msg, msg
    if key not in TEXT:
        msg = refused(f'--{key}=-1')
        assert (f"{key}=-1" in msg or f"{key}=-1.0" in msg) and f'write --{key}=' in msg, msg


def test_a_refusal_names_the_config_file_line_and_a_key_without_dashes(tmp_path):
    path = tmp_path / 'c.py'
    path.write_text("n_layer = 2\n\nbatch_sise = 4\n")
    assert re.search(r"c\.py, line 3\b.*'batch_sise'.*\bbatch_size\b", refused(str(path)))
    path.write_text("# a comment\nbatch_size = 'four'\n")
    assert re.search(r"c\.py, line 2\b.*batch_size='four'.*--batch_size=32", refused(str(path)))
    assert str(tmp_path) in refused(str(tmp_path))  # a folder, not a config file
    assert '--max_iters=5' in refused('max_iters=5')


def test_the_default_of_every_key_is_accepted():
    """The refusals' advice (write the default) is itself a value parse_config takes."""
    for key, value in config.DEFAULTS.items():
        if value is not None and value != '':
            cfg = config.parse_config([*DIFF, f'--{key}={config.typed(value)}'])
            assert cfg[key] == value, key


def test_a_run_that_cannot_fit_in_memory_is_refused_before_anything_is_made(tmp_path):
    """--block_size=100000 was killed by the OOM killer without a word; now the activations' lower bound is set
    against the machine's memory first, before the run folder is made."""
    from test_train import cli, refused as refused_run
    out = tmp_path / 'o'
    # 10^7 positions: several TiB of activations by the lower bound, more than any machine's memory (10^5, the case
    # that was killed at 3869fff, is about 78 GiB in bf16: more than that machine's 24 GiB, not every one's)
    refused_run(cli('configs/nanogpt_3L.py', '--device=cpu', '--block_size=10000000', f'--out_dir={out}'),
                'block_size=10000000', '--block_size')
    assert not out.exists()


def suggested_fix(message, key):
    """The `--key=value` a refusal says to write."""
    return next(w.rstrip(',;') for w in message.split() if w.startswith(f'--{key}='))


@pytest.mark.parametrize('bad', ['--n_layer=0', '--max_iters=-5', '--max_iters=five', '--max_iters=', '--beta2=1.5'])
def test_a_refused_override_s_fix_is_the_value_the_config_gave(tmp_path, bad):
    """The fix a refusal quotes is this run's value, the config file's (a 3-layer config, a 200-step schedule), not
    the global default: written as typed, it gives the run its config made."""
    path = tmp_path / 'c.py'
    path.write_text("n_layer = 3\nmax_iters = 200\nbeta2 = 0.95\n")
    key = bad[2:].split('=')[0]
    with pytest.raises(ValueError) as e:
        config.parse_config([str(path), bad])
    fixed = config.parse_config([str(path), suggested_fix(str(e.value), key)])
    assert fixed == config.parse_config([str(path)]), str(e.value)
