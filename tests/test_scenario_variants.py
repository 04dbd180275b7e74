"""A Scenario holds its variants as one tuple: looked up by class, replaced and dropped without naming an attribute."""

import pytest

from attncli.core.variants import Alibi, LearnedSink, Mask, Rope, SoftCap
from attncli.sources.yaml_scenario import load


def test_a_variant_is_found_by_its_class_and_absent_ones_are_none():
    """llama-style holds RoPE and a causal mask, and no soft-capping; the mask is always there."""
    s = load("llama-style")
    rope = s.variant(Rope)
    assert isinstance(rope, Rope) and rope in s.variants
    assert s.variant(SoftCap) is None
    assert s.variant(Mask) is s.mask and s.mask.causal


def test_with_variants_replaces_one_of_a_class_adds_others_in_registry_order_and_without_drops():
    """Replacing RoPE keeps one RoPE; a cap and a sink join in the registry's order; `without` leaves the rest alone."""
    s = load("llama-style")
    turned = s.with_variants(Rope(theta=500.0), LearnedSink((0.5,) * s.heads), SoftCap(30.0), Mask())
    assert [type(v) for v in turned.variants] == [Rope, SoftCap, LearnedSink]
    assert turned.variant(Rope).theta == 500.0 and not turned.mask.causal
    assert s.variant(Rope).theta == 10000.0 and s.mask.causal  # the original is unchanged
    dropped = turned.without(Rope, Alibi)
    assert [type(v) for v in dropped.variants] == [SoftCap, LearnedSink]


def test_two_variants_of_one_class_are_refused():
    """A scenario cannot hold two RoPEs, nor the mask among its variants."""
    s = load("cat")
    with pytest.raises(AssertionError):
        type(s)(name="x", tokens=("a",), heads=1, scale=s.scale, variants=(Rope(), Rope()))
    with pytest.raises(AssertionError):
        type(s)(name="x", tokens=("a",), heads=1, scale=s.scale, variants=(Mask(),))
