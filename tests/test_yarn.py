"""YaRN RoPE (gpt-oss, DeepSeek-V3, Qwen2.5's long-context card): attncli's frequencies, attention factor and
DeepSeek's softmax scale against the numbers transformers itself computes for the published configs.

The goldens were printed by scripts/make_yarn_goldens.py (transformers 5.24.0, torch 2.13.0); no torch here.
transformers builds the frequencies in float32 (`torch.arange(...).float()`, a float32 ramp), attncli in float64, so
they agree to float32's rounding (relative 1e-6); the attention factor and the softmax scale are Python floats in
both and agree to 1e-12.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.sources.checkpoints.config import RopeConfig
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.rope import inverse_frequencies, rope_spec
from tests.yarn_configs import CONFIGS, LONGROPE, SHORT_SENTENCE, TINY, with_longrope, with_yarn

GOLDENS = {
    'gpt-oss-20b': {"inv_freq": [1.0, 0.6890442967414856, 0.4747820496559143, 0.32714587450027466, 0.22541800141334534, 0.15532298386096954, 0.1070244237780571, 0.07374456524848938, 0.05081327259540558, 0.031705696135759354, 0.019334999844431877, 0.011592049151659012, 0.006794959306716919, 0.0038603590801358223, 0.002093792660161853, 0.00105260219424963, 0.0004564839182421565, 0.00012931869423482567, 3.830881178146228e-05, 2.6396468456368893e-05, 1.818833698052913e-05, 1.253256959898863e-05, 8.635495760245249e-06, 5.95023948335438e-06, 4.099978468730114e-06, 2.8250667583051836e-06, 1.9465962850517826e-06, 1.3412909538601525e-06, 9.242089618055616e-07, 6.368209142237902e-07, 4.38797854940276e-07, 3.023511396804679e-07], "attention_factor": 1.3465735902799727},
    'DeepSeek-V3': {"inv_freq": [1.0, 0.7498942017555237, 0.5623413324356079, 0.4216965138912201, 0.3162277638912201, 0.23713736236095428, 0.17782793939113617, 0.1333521455526352, 0.10000000149011612, 0.07498941570520401, 0.05623412877321243, 0.039006926119327545, 0.026879360899329185, 0.01837814413011074, 0.012447956018149853, 0.0083345090970397, 0.005500000435858965, 0.0035619973205029964, 0.002249365206807852, 0.0013705134624615312, 0.0007905694073997438, 0.0004149904125370085, 0.00017782794020604342, 3.333803397254087e-05, 2.499999936844688e-05, 1.8747354260995053e-05, 1.4058532542549074e-05, 1.0542412383074407e-05, 7.905694474175107e-06, 5.928434347879374e-06, 4.445698323252145e-06, 3.3338035336782923e-06], "attention_factor": 1.0, "softmax_scale": 0.1352337788608801},
    'Qwen2.5-7B-Instruct+yarn': {"inv_freq": [1.0, 0.8058422207832336, 0.6493816375732422, 0.5232991576194763, 0.4216965138912201, 0.33982083201408386, 0.2738419771194458, 0.22067339718341827, 0.17782793939113617, 0.14330126345157623, 0.11547820270061493, 0.09305720031261444, 0.07498941570520401, 0.0604296438395977, 0.04869675263762474, 0.03924189880490303, 0.03162277862429619, 0.025482967495918274, 0.02053525112569332, 0.016548171639442444, 0.01333521492779255, 0.010746078565716743, 0.00865964312106371, 0.006978305988013744, 0.005375321488827467, 0.004131738096475601, 0.0031684227287769318, 0.002423422411084175, 0.0018482765881344676, 0.0014051124453544617, 0.0010643609566614032, 0.000802959781140089, 0.0006029411451891065, 0.0004503235686570406, 0.00033424055436626077, 0.0002462583943270147, 0.0001798411540221423, 0.00012993148993700743, 9.262301318813115e-05, 6.490394298452884e-05, 4.4456985051510856e-05, 3.582531644497067e-05, 2.8869548259535804e-05, 2.3264301489689387e-05, 1.8747356079984456e-05, 1.5107409126358107e-05, 1.2174188668723218e-05, 9.8104746939498e-06, 7.905693564680405e-06, 6.370741630234988e-06, 5.133812464919174e-06, 4.137042651564116e-06, 3.3338035336782923e-06, 2.686519565031631e-06, 2.1649109385180054e-06, 1.7445765934098745e-06, 1.405853367941745e-06, 1.1328959317324916e-06, 9.129353202297352e-07, 7.356817945947114e-07, 5.928434347879374e-07, 4.777382400789065e-07, 3.8498163235090033e-07, 3.102344408034696e-07], "attention_factor": 1.138629436111989},
    'longrope': {"short": [1.0, 0.7860992550849915, 0.6193563938140869, 0.48899245262145996, 0.38679906725883484, 0.30649495124816895, 0.24325212836265564, 0.19334496557712555, 0.15388818085193634, 0.1226399689912796, 0.09785328060388565, 0.07816306501626968, 0.0625, 0.05002449452877045, 0.04007600620388985, 0.032133787870407104, 0.02578660286962986, 0.020709119737148285, 0.016643567010760307, 0.013385419733822346, 0.010772175155580044, 0.008674534037709236, 0.006989520508795977, 0.005635012406855822, 0.004545454401522875, 0.003668464021757245, 0.002962138969451189, 0.002392941853031516, 0.0019339955179020762, 0.001563749392516911, 0.0012649111449718475, 0.0010235912632197142, 0.0008286286611109972, 0.0006710488814860582, 0.0005436294595710933, 0.00044055539183318615, 0.0003571428533177823, 0.0002896155638154596, 0.00023492825857829303, 0.00019062418141402304, 0.00015471965889446437, 0.00012561265612021089, 0.0001020089621306397, 8.286214870167896e-05, 6.732606561854482e-05, 5.471629265230149e-05, 4.447877290658653e-05, 3.6165001802146435e-05], "long": [1.0, 0.4344232678413391, 0.2433185875415802, 0.15198414027690887, 0.10090410709381104, 0.06965794414281845, 0.049410589039325714, 0.03575557842850685, 0.026273591443896294, 0.019541531801223755, 0.014677993021905422, 0.011114931665360928, 0.008474576286971569, 0.006499245297163725, 0.005009500775486231, 0.003878215793520212, 0.0030140182934701443, 0.0023504216223955154, 0.0018385335570201278, 0.0014420757070183754, 0.0011339131742715836, 0.000893607793841511, 0.0007056727190501988, 0.0005583076854236424, 0.00044247787445783615, 0.00035123591078445315, 0.0002792180166579783, 0.00022226930013857782, 0.00017715990543365479, 0.000141372176585719, 0.00011293849092908204, 9.031687659444287e-05, 7.229645416373387e-05, 5.7924411521526054e-05, 4.644934961106628e-05, 3.7277764931786805e-05, 2.994011992996093e-05, 2.4064265744527802e-05, 1.9354883988853544e-05, 1.5577323210891336e-05, 1.2544836863526143e-05, 1.0108669812325388e-05, 8.150200301315635e-06, 6.574704457307234e-06, 5.3064882195030805e-06, 4.285010618332308e-06, 3.4617914934642613e-06, 2.7979849619441666e-06], "attention_factor": 1.1902380714238083},
}  # fmt: skip


def _config(tmp_path: Path, raw: dict[str, object]) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return tmp_path


def _head(raw: dict[str, object]) -> int:
    """The rotated width transformers uses: DeepSeek's rope part, else head_dim or hidden / heads."""
    if raw["model_type"] == "deepseek_v3":
        return int(raw["qk_rope_head_dim"])  # type: ignore[call-overload]
    return int(raw.get("head_dim") or raw["hidden_size"] // raw["num_attention_heads"])  # type: ignore[call-overload, operator]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_yarn_frequencies_and_attention_factor_equal_transformers(tmp_path: Path, name: str) -> None:
    raw = CONFIGS[name]
    cfg = read_config(_config(tmp_path, raw))
    assert cfg.rope is not None and cfg.rope.kind == "yarn"
    golden = GOLDENS[name]
    ours = inverse_frequencies(cfg.rope, _head(raw))
    assert ours.dtype == np.float64 and ours.shape == (len(golden["inv_freq"]),)
    np.testing.assert_allclose(ours, golden["inv_freq"], rtol=1e-6, atol=0)
    assert cfg.rope.yarn_attention_factor == pytest.approx(golden["attention_factor"], rel=1e-12)
    spec = rope_spec(cfg.rope, _head(raw))
    assert spec.attention_factor == pytest.approx(golden["attention_factor"], rel=1e-12)


def test_the_frequencies_blend_between_kept_and_divided() -> None:
    """gpt-oss: the fast pairs keep θ^(−2i/d), the slow ones are divided by the factor, the ramp between is neither."""
    rope = RopeConfig(theta=150000.0, kind="yarn", factor=32.0, original_positions=4096, truncate=False)
    plain = 1.0 / 150000.0 ** (np.arange(0, 64, 2) / 64)
    ours = inverse_frequencies(rope, 64)
    assert ours[0] == plain[0] and ours[-1] == pytest.approx(plain[-1] / 32, rel=1e-15)
    ratio = plain / ours
    assert np.all(np.diff(ratio) >= -1e-12) and 1 < ratio[12] < 32  # monotone from 1 to 32


def test_cos_and_sin_carry_the_attention_factor() -> None:
    """transformers multiplies cos and sin by attention_scaling: a rotated vector grows by that factor."""
    rope = RopeConfig(theta=10000.0, kind="yarn", factor=4.0, original_positions=32, beta_fast=8, beta_slow=1)
    spec = rope_spec(rope, 8)
    x = np.arange(1.0, 17.0).reshape(2, 8)
    rotated = spec.apply(x, np.arange(2))
    factor = 0.1 * math.log(4.0) + 1
    assert spec.attention_factor == pytest.approx(factor, rel=1e-15)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=1), factor * np.linalg.norm(x, axis=1), rtol=1e-13)
    cos, sin = spec.table(np.arange(2), 8)
    np.testing.assert_allclose(cos**2 + sin**2, factor**2, rtol=1e-13)


def test_deepseek_softmax_scale_is_multiplied_by_mscale_squared(tmp_path: Path) -> None:
    from attncli.sources.checkpoints.deepseek import _mscale

    cfg = read_config(_config(tmp_path, CONFIGS["DeepSeek-V3"]))
    divisor = math.sqrt(128 + 64) / _mscale(cfg) ** 2
    assert 1.0 / divisor == pytest.approx(GOLDENS["DeepSeek-V3"]["softmax_scale"], rel=1e-12)


def test_the_header_says_the_scaling_in_words(tmp_path: Path) -> None:
    cfg = read_config(_config(tmp_path, CONFIGS["gpt-oss-20b"]))
    assert cfg.rope is not None
    assert cfg.rope.describe() == (
        "yarn (factor 32, original 4096 positions, beta fast/slow 32/1, not truncated; cos and sin × 1.34657)"
    )


@pytest.mark.parametrize(
    ("change", "key"),
    [({"beta_fast": "fast"}, "beta_fast"), ({"truncate": 1}, "rope_scaling.truncate"), ({"mscale": -1}, "rope_scaling.mscale")],
)
def test_a_bad_yarn_key_is_one_line(tmp_path: Path, change: dict[str, object], key: str) -> None:
    raw = dict(CONFIGS["gpt-oss-20b"])
    raw["rope_scaling"] = {**raw["rope_scaling"], **change}  # type: ignore[dict-item]
    with pytest.raises(AttnError) as error:
        read_config(_config(tmp_path, raw))
    assert error.value.key == key


CHECKPOINTS = Path(__file__).parent / "checkpoints"
FLOAT32 = 1e-6  # transformers builds inv_freq, cos and sin in float32 inside its float64 model


def _tiny(tmp_path: Path, family: str) -> Path:
    import shutil

    folder = tmp_path / family
    shutil.copytree(CHECKPOINTS / family, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(with_yarn(config, family)))
    return folder


@pytest.mark.parametrize(("family", "layer"), [(f, layer) for f in TINY for layer in (1, 2)])
def test_every_head_of_a_yarn_model_equals_transformers(tmp_path: Path, family: str, layer: int) -> None:
    """The tiny gpt-oss and DeepSeek-V3 fixtures with their real model's YaRN: every layer's input and every head's
    weights equal transformers' (scripts/make_yarn_goldens.py --tiny) to float32's bound, and differ from the same model's
    with default RoPE."""
    from attncli.core import engine
    from attncli.sources.checkpoints.scenario import load_scenario

    with np.load(CHECKPOINTS / f"yarn_{family}.npz") as data:
        golden = {key: data[key] for key in data.files}
    scenario = load_scenario(_tiny(tmp_path, family), layer=layer, sentence=str(golden["text"]))
    expected_X = golden["attention_inputs"][layer - 1]  # float32's rounding grows with the residual stream's values
    np.testing.assert_allclose(scenario.X, expected_X, rtol=0, atol=FLOAT32 * max(1.0, float(np.abs(expected_X).max())))
    weights = np.stack([head.weights for head in engine.run(scenario).heads])
    np.testing.assert_allclose(weights, golden["attentions"][layer - 1], rtol=0, atol=FLOAT32)
    plain = np.load(CHECKPOINTS / family / "golden.npz")["attentions"][layer - 1]  # the same model with default RoPE
    assert np.abs(weights - plain).max() > 1e-3


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "html"])
def test_explain_says_cos_and_sin_carry_the_attention_factor(cli, tmp_path: Path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    folder = _tiny(tmp_path, "gpt_oss")
    result = cli("explain", "--model", str(folder), "--layer", "2", "--sentence", "The cat sat", "--head", "1", "--position", "3", "--format", fmt)
    assert result.exit_code == 0, result.stderr
    assert "YaRN attention factor" in result.stdout and "1.3466" in result.stdout


def test_longrope_frequencies_and_attention_factor_equal_transformers(tmp_path: Path) -> None:
    """Phi-3-mini-128k's shape: the short factors up to 4096 tokens, the long ones beyond, cos and sin × √(1 + ln 32 / ln 4096)."""
    cfg = read_config(_config(tmp_path, LONGROPE))
    assert cfg.rope is not None and cfg.rope.kind == "longrope" and cfg.rope.factor == 32
    golden = GOLDENS["longrope"]
    np.testing.assert_allclose(inverse_frequencies(cfg.rope, 96), golden["short"], rtol=1e-6, atol=0)
    np.testing.assert_allclose(inverse_frequencies(cfg.rope, 96, 4096), golden["short"], rtol=1e-6, atol=0)
    np.testing.assert_allclose(inverse_frequencies(cfg.rope, 96, 4097), golden["long"], rtol=1e-6, atol=0)
    assert rope_spec(cfg.rope, 96).attention_factor == pytest.approx(golden["attention_factor"], rel=1e-12)
    assert "longrope" in (cfg.rope.describe() or "")


def test_a_longrope_list_of_the_wrong_length_is_one_line(tmp_path: Path) -> None:
    raw = {**LONGROPE, "rope_scaling": {**LONGROPE["rope_scaling"], "long_factor": [1.0] * 47}}  # type: ignore[dict-item]
    cfg = read_config(_config(tmp_path, raw))
    assert cfg.rope is not None
    with pytest.raises(AttnError, match="long_factor has 47 numbers for 48 rotary pairs"):
        rope_spec(cfg.rope, 96, 5000)


@pytest.mark.parametrize(("which", "layer"), [(w, layer) for w in ("long", "short") for layer in (1, 2)])
def test_every_head_of_a_longrope_phi3_equals_transformers(tmp_path: Path, which: str, layer: int) -> None:
    """The tiny phi3 fixture with longrope and 8 original positions: its 13-token sentence turns by the long factor,
    a 4-token one by the short, each head's weights as transformers' (make_yarn_goldens.py --tiny) to 1e-6."""
    import shutil

    from attncli.core import engine
    from attncli.sources.checkpoints.scenario import load_scenario

    folder = tmp_path / "phi3"
    shutil.copytree(CHECKPOINTS / "phi3", folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(with_longrope(config)))
    with np.load(CHECKPOINTS / "longrope_phi3.npz") as data:
        golden = {key: data[key] for key in data.files}
    sentence = str(golden["text"]) if which == "long" else SHORT_SENTENCE
    scenario = load_scenario(folder, layer=layer, sentence=sentence)
    assert golden["ids" if which == "long" else "short_ids"].shape[0] == scenario.L
    weights = np.stack([head.weights for head in engine.run(scenario).heads])
    np.testing.assert_allclose(weights, golden[f"{which}_attentions"][layer - 1], rtol=0, atol=FLOAT32)


def test_json_gives_the_attention_factor_as_its_own_key(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The scenario's rope in JSON has "attention_factor": gpt-oss's YaRN factor as transformers computes it (the golden
    above), for run, explain and decode; 1.0 for a scenario's own RoPE. The "scaling" words stay as they were."""
    folder = _tiny(tmp_path, "gpt_oss")
    wanted = GOLDENS["gpt-oss-20b"]["attention_factor"]
    model = ["--model", str(folder), "--layer", "2", "--sentence", "The cat sat"]
    for command in (["run"], ["explain", "--position", "2"], ["decode"]):
        result = cli(*command, *model, "--format", "json")
        assert result.exit_code == 0, result.stderr
        rope = json.loads(result.stdout)["scenario"]["rope"]
        assert rope["attention_factor"] == pytest.approx(wanted, rel=1e-12) and "yarn" in rope["scaling"], command
    plain = json.loads(cli("run", "llama-style", "--format", "json").stdout)["scenario"]["rope"]
    assert plain["attention_factor"] == 1.0


def _longrope_phi3(tmp_path: Path) -> Path:
    import shutil

    folder = tmp_path / "phi3"
    shutil.copytree(CHECKPOINTS / "phi3", folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(with_longrope(config)))
    return folder


@pytest.mark.parametrize("layer", [1, 2])
def test_longrope_decode_switches_factors_as_transformers_generates(tmp_path: Path, layer: int) -> None:
    """The tiny longrope phi3 (8 original positions) decoding its 13-token sentence: every step's weights of every head
    equal transformers' `generate` step by step (make_yarn_goldens.py --decode), where steps 1–8 use the short factors
    and step 9 drops the cache and recomputes every key with the long ones (its query length 9 in the golden). Without
    the switch (the long factors throughout, the whole run's rows) steps 2–8 would differ."""
    from attncli import api

    folder = _longrope_phi3(tmp_path)
    with np.load(CHECKPOINTS / "longrope_phi3_decode.npz") as data:
        golden = {key: data[key] for key in data.files}
    assert golden["query_lengths"].tolist() == [1] * 8 + [9] + [1] * 4  # transformers recomputed the cache at step 9
    sentence = str(golden["text"])
    loaded = api.load_model(folder, layer=layer, sentence=sentence)
    before = api.longrope_prefix(folder, layer=layer, sentence=sentence)
    assert before is not None and before.L == 8 and loaded.L == 13
    for head in range(1, loaded.heads + 1):
        decoded = api.decode(loaded, head=head, before=before).decoded
        assert decoded.switched == 9
        assert api.decode(loaded, head=head).decoded.switched == 9  # the checkpoint's scenario finds its first tokens itself
        for step in decoded.steps:
            t = step.position
            np.testing.assert_allclose(step.weights, golden["step_rows"][layer - 1, head - 1, t - 1, :t], rtol=0, atol=FLOAT32)
        plain = api.decode(loaded, head=head, switch=False).decoded  # the factors chosen from the whole sentence's length
        assert max(np.abs(p.weights - golden["step_rows"][layer - 1, head - 1, p.position - 1, : p.position]).max() for p in plain.steps) > 1e-3


def test_decode_says_where_longrope_switches(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """decode's report says at step 9 that the factors change and the cache is computed again; JSON has "rope_switch": 9;
    a sentence within the original positions has no switch."""
    folder = _longrope_phi3(tmp_path)
    sentence = "The cat sat on the mat, then the cat slept."
    model = ["--model", str(folder), "--layer", "2", "--sentence", sentence]
    said = " ".join(cli("decode", *model).stdout.split())
    assert "steps 1–8 turn q and k by the short factors" in said
    step9 = said[said.index("Step 9:") :]
    assert "RoPE switches from the short factors to the long ones" in step9 and "computes every key again" in step9
    assert "row 8 of the causal run of the first 8 tokens (short factors)" in said
    assert json.loads(cli("decode", *model, "--format", "json").stdout)["rope_switch"] == 9
    scenario = tmp_path / "phi3-longrope.yaml"  # the same checkpoint behind a scenario file's `model:` switches the same way
    scenario.write_text(json.dumps({"model": str(folder), "layer": 2, "sentence": sentence}), encoding="utf-8")
    assert json.loads(cli("decode", str(scenario), "--format", "json").stdout)["rope_switch"] == 9
    for within in (SHORT_SENTENCE, "The cat sat on the mat,"):  # 4 tokens, and exactly the 8 original positions
        result = cli("decode", "--model", str(folder), "--layer", "2", "--sentence", within, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert "rope_switch" not in json.loads(result.stdout)
    assert len(json.loads(result.stdout)["steps"]) == 8


def test_longrope_decode_against_transformers_live(tmp_path: Path) -> None:
    """The live tier (torch and transformers, else skipped): transformers' `generate` run now on the tiny longrope phi3
    gives every step of every head of both layers as attncli's decode with the switch, to 1e-6."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:  # not installed, or unable to load
        pytest.skip(f"optional oracle: pip install torch==2.13.0 transformers ({error})")
    from attncli import api
    from tests.yarn_configs import generated_rows

    folder = _longrope_phi3(tmp_path)
    with np.load(CHECKPOINTS / "phi3" / "golden.npz") as data:
        ids, sentence = data["ids"].tolist(), str(data["text"])
    rows, query_lengths = generated_rows(folder, ids)
    assert query_lengths[8] == 9  # the cache dropped and computed again at step 9
    for layer in (1, 2):
        loaded = api.load_model(folder, layer=layer, sentence=sentence)
        before = api.longrope_prefix(folder, layer=layer, sentence=sentence)
        for head in range(1, loaded.heads + 1):
            for step in api.decode(loaded, head=head, before=before).decoded.steps:
                t = step.position
                np.testing.assert_allclose(step.weights, rows[layer - 1, head - 1, t - 1, :t], rtol=0, atol=FLOAT32)
