"""Tiny models, the local tokenizer, generation backends, log-probs and values."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlplex.stages import batch as B  # noqa: E402
from rlplex.stages import generation as G  # noqa: E402
from rlplex.stages import logprobs as LP  # noqa: E402
from rlplex.stages import models as M  # noqa: E402
from rlplex.stages import toy  # noqa: E402
from rlplex.stages.tokenizer import CharTokenizer, CharTokenizerConfig  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return toy.toy_tokenizer()


@pytest.fixture(scope="module")
def lm():
    return M.build_causal_lm(M.ModelConfig())


def test_tokenizer_round_trip_and_eos(tok):
    ids = tok.encode("305")
    assert ids == [tok.bos_token_id, 6, 3, 8]
    assert tok.decode(ids) == "305"
    assert tok.decode([6, tok.eos_token_id, 7]) == "3"
    assert tok.decode([6, tok.eos_token_id], skip_special_tokens=False) == "3<eos>"
    with pytest.raises(ValueError, match="vocab_size"):
        CharTokenizer(CharTokenizerConfig(alphabet="x" * 20, vocab_size=16))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tiny_model_is_seeded_and_sized(arch):
    cfg = M.ModelConfig(arch=arch)
    a, b = M.build_causal_lm(cfg), M.build_causal_lm(cfg)
    assert a.config.num_hidden_layers == 2 and a.config.vocab_size == 16
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert na == nb and torch.equal(pa, pb)
    other = M.build_causal_lm(cfg.model_copy(update={"seed": 1}))
    assert not torch.equal(next(iter(other.parameters())), next(iter(a.parameters())))


def test_model_loads_from_a_local_path(tmp_path, lm):
    lm.save_pretrained(tmp_path)
    loaded = M.build_causal_lm(M.ModelConfig(path=str(tmp_path)))
    ids = torch.tensor([[1, 4, 5, 6]])
    assert torch.allclose(loaded(input_ids=ids).logits, lm(input_ids=ids).logits, atol=1e-6)
    critic = M.build_critic(M.ModelConfig(path=str(tmp_path)))
    assert critic(input_ids=ids).logits.shape == (1, 4, 1)


def test_response_mask_stops_after_first_eos():
    ids = torch.tensor([[5, 2, 7, 2], [5, 6, 7, 8], [2, 0, 0, 0]])
    assert B.response_mask(ids, 2).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_hf_generator_samples_n_per_prompt(tok, lm):
    gen = G.HFGenerator(lm, tok.pad_token_id, tok.eos_token_id)
    prompts = [tok.encode("12"), tok.encode("3")]
    torch.manual_seed(0)
    out = gen.generate(prompts, G.SamplingConfig(n=3, max_new_tokens=4, top_p=0.9))
    assert out["prompt_ids"].shape == (6, 3)
    assert out["group"].tolist() == [0, 0, 0, 1, 1, 1]
    # Left padding: the shorter prompt starts with a pad and its mask says so.
    assert out["prompt_mask"][3].tolist() == [0, 1, 1]
    assert out["response_ids"].shape[0] == 6 and out["response_ids"].shape[1] <= 4
    assert torch.equal(out["response_mask"], B.response_mask(out["response_ids"], 2))


def test_hf_generator_weight_update_in_place(tok):
    gen = G.HFGenerator(M.build_causal_lm(M.ModelConfig()), tok.pad_token_id, tok.eos_token_id)
    other = M.build_causal_lm(M.ModelConfig(seed=3))
    gen.update_weights((n, p.detach()) for n, p in other.named_parameters())
    for (_, a), (_, b) in zip(gen.model.named_parameters(), other.named_parameters(), strict=True):
        assert torch.equal(a, b)


def _direct_logprobs(model, prompt, response, temperature):
    """Log-probs of ``response`` after ``prompt``, from one unpadded forward pass."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0] / temperature
    logp = torch.log_softmax(logits, -1)
    return [logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(response)]


def test_response_logprobs_match_a_direct_forward_pass(lm, tok):
    prompts = [tok.encode("1234"), tok.encode("5")]
    responses = [[7, 8, 2], [9, 2]]
    batch = G._batch_from_responses(prompts, responses, 1, tok.pad_token_id, tok.eos_token_id)
    got = LP.response_logprobs(lm, batch, temperature=0.7, micro_batch_size=1)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        want = _direct_logprobs(lm, p, r, 0.7)
        assert got[i, : len(r)].tolist() == pytest.approx(want, abs=1e-5)


def test_values_come_from_the_state_before_each_token(tok):
    critic = M.build_critic(M.ModelConfig())
    prompts, responses = [tok.encode("12")], [[5, 2]]
    batch = G._batch_from_responses(prompts, responses, 1, tok.pad_token_id, tok.eos_token_id)
    values = LP.response_values(critic, batch)
    with torch.no_grad():
        direct = critic(input_ids=torch.tensor([prompts[0] + responses[0]])).logits[0, :, 0]
    assert values[0].tolist() == pytest.approx(direct[2:4].tolist(), abs=1e-5)


def test_reward_model_scores_each_sequence(tok):
    rm = M.build_reward_model(M.ModelConfig())
    batch = G._batch_from_responses([tok.encode("12"), tok.encode("3")], [[5, 2], [6, 2]], 1, 0, 2)
    scores = LP.reward_model_scores(rm, batch)
    assert scores.shape == (2,) and torch.isfinite(scores).all()


# -- vLLM adapter against a stand-in engine with vLLM's documented interface -------


class FakeSamplingParams:
    def __init__(self, n, temperature, top_p, max_tokens):
        self.n, self.temperature, self.top_p, self.max_tokens = n, temperature, top_p, max_tokens


class FakeLLM:
    """``LLM.generate(prompts, sampling_params)``, ``sleep``, ``wake_up``, ``collective_rpc``."""

    def __init__(self, model):
        self.worker = SimpleNamespace(model_runner=SimpleNamespace(model=self))
        self.model = model
        self.calls = []

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append(("generate", params.n, params.max_tokens))
        outs = []
        for p in prompts:
            ids = p["prompt_token_ids"]
            completions = [
                SimpleNamespace(token_ids=[(ids[-1] + k) % 10 + 3, 2]) for k in range(params.n)
            ]
            outs.append(SimpleNamespace(outputs=completions))
        return outs

    def sleep(self, level=1):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))

    def collective_rpc(self, method, args=()):
        return [method(self.worker, *args)]

    def load_weights(self, weights):
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor)
        self.calls.append(("load_weights", len(weights)))


def test_vllm_generator_drives_the_documented_interface(tok):
    model = M.build_causal_lm(M.ModelConfig())
    engine = FakeLLM(model)
    gen = G.VLLMGenerator(engine, 0, 2, sampling_params_cls=FakeSamplingParams)
    out = gen.generate([tok.encode("12"), tok.encode("3")], G.SamplingConfig(n=2, max_new_tokens=3))
    assert out["response_ids"].shape == (4, 2)
    assert out["response_mask"].tolist() == [[1, 1]] * 4
    assert out["group"].tolist() == [0, 0, 1, 1]
    gen.sleep(2)
    gen.wake_up(["weights"])
    new = M.build_causal_lm(M.ModelConfig(seed=5))
    gen.update_weights(new.named_parameters())
    assert torch.equal(next(iter(model.parameters())), next(iter(new.parameters())))
    assert engine.calls[1:] == [
        ("sleep", 2),
        ("wake_up", ["weights"]),
        ("load_weights", len(list(new.parameters()))),
    ]


def test_vllm_missing_is_a_clear_error():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(G.BackendUnavailable, match="pip install 'rlplex\\[vllm\\]'"):
            G.make_vllm_engine("/nonexistent", G.GeneratorConfig(backend="vllm"))
    else:  # pragma: no cover - only where vLLM is installed
        pytest.skip("vLLM is installed; the missing-backend message cannot be shown")
