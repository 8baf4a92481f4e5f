"""pytest plugin: llama.cpp's own server test suite (../shared/llama-server-tests) against `sift serve`.

Loaded with `-p sift_adapter` by tests/llama_server_suite/run.py, which copies the suite to a
scratch directory first (it is never copied into this repository). The suite's utils.py starts
the binary named by LLAMA_SERVER_BIN_PATH with llama-server's flags and asks it to download its
models from Hugging Face. Nothing is downloaded here, so this plugin:

- points LLAMA_SERVER_BIN_PATH at `sift-as-llama-server` (beside this file), which turns
  `--hf-repo/--hf-file` into `--model` with a local file and passes every other flag to
  `sift serve` as it is: a flag sift does not take fails the test, as it would fail a user;
- makes the models we can make: the suite's stories260K-infill (stories260K with fill-in-the-
  middle tokens) is `sift mkmodel --fim-style codellama --from stories260K.gguf` (MADE below):
  CodeLlama's prefix/suffix/middle tokens, a llama vocabulary's own FIM form, without
  repository tokens. The upstream file cannot be fetched; its tests' expected words (stories
  about Jimmy, the park) come out with this form, not with Qwen's repository form;
- skips, with the reason, a test whose server needs a model we do not have (MODELS below),
  and the tests that build an OpenAI *Python* client (Debian 12 has no `openai` package; the
  official npm client is tested in tests/openai_client instead);
- makes ServerPreset.load_all (the suite's download step) a no-op, and stubs `wget`, which
  only the download helper uses;
- puts the models the router tests name (ROUTER_MODELS below) into the suite's download
  cache (tmp/, LLAMA_CACHE), laid out as llama.cpp's downloads are (models--OWNER--REPO/
  snapshots/COMMIT/NAME-TAG.gguf, symbolic links to the local files), where a router
  (ServerPreset.router(): no model) finds them, as llama-server's does after load_all. Those
  tests check the router (loading, unloading, eviction, routing, keys), never what a model
  writes, so tinygemma3, which we do not have, is played by stories260K under its name.

Nothing here changes what a test asserts.
"""
import os
import subprocess
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_MODELS = os.environ.get("SIFT_SHARED_MODELS", os.path.join(HERE, "..", "..", "..", "shared", "models"))

# (hf repo, hf file) -> a local GGUF; None as the file matches any file of the repo
MODELS = {
    ("ggml-org/test-model-stories260K", None): "stories260K.gguf",
    ("ggml-org/models", "tinyllamas/stories260K.gguf"): "stories260K.gguf",
}


# (hf repo, hf file) -> (a local GGUF, the `sift mkmodel` flags that make the model from it)
MADE = {
    ("ggml-org/test-model-stories260K-infill", None): ("stories260K.gguf", ["--fim-style", "codellama"]),
}


# router mode: the suite's model ids (OWNER/REPO:TAG) -> (hf repo, hf file) of a model above
ROUTER_MODELS = {
    "ggml-org/tinygemma3-GGUF:Q8_0": ("ggml-org/test-model-stories260K", None),  # a stand-in (see the top)
    "ggml-org/test-model-stories260K:F32": ("ggml-org/test-model-stories260K", None),
    "ggml-org/test-model-stories260K-infill:F32": ("ggml-org/test-model-stories260K-infill", None),
}


def fill_cache():
    """ROUTER_MODELS in tmp/ (the suite's LLAMA_CACHE) as llama.cpp's download cache holds them."""
    commit = "0" * 40
    for mid, (repo, file) in ROUTER_MODELS.items():
        path = local_model(repo, file)
        if not path:
            continue
        name, tag = mid.split(":")
        top = os.path.join(os.getcwd(), "tmp", "models--" + name.replace("/", "--"))
        snap = os.path.join(top, "snapshots", commit)
        os.makedirs(snap, exist_ok=True)
        os.makedirs(os.path.join(top, "refs"), exist_ok=True)
        with open(os.path.join(top, "refs", "main"), "w") as f:
            f.write(commit)
        link = os.path.join(snap, f"{name.split('/')[1]}-{tag}.gguf")
        if not os.path.lexists(link):
            os.symlink(path, link)


def made_model(repo, file):
    """The model MADE names, written once per run into the suite's tmp/ (None if its source is missing)."""
    src, flags = MADE.get((repo, file)) or MADE.get((repo, None)) or (None, None)
    src = os.path.join(SHARED_MODELS, src) if src else None
    if not src or not os.path.exists(src):
        return None
    out = os.path.join(os.getcwd(), "tmp", repo.split("/")[-1] + ".gguf")
    if not os.path.exists(out):
        subprocess.run([os.environ["SIFT_BIN"], "mkmodel", *flags, "--from", src, "-o", out], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def local_model(repo, file):
    name = MODELS.get((repo, file)) or MODELS.get((repo, None))
    path = os.path.join(SHARED_MODELS, name) if name else None
    return path if path and os.path.exists(path) else made_model(repo, file)


# `from openai import OpenAI` at a test module's top: importable, and skips the test that uses it
class _NoOpenAI:
    def __init__(self, *a, **k):
        pytest.skip("needs the openai Python package (not in Debian 12)")


sys.modules.setdefault("openai", types.SimpleNamespace(OpenAI=_NoOpenAI))
sys.modules.setdefault("wget", types.SimpleNamespace(download=lambda *a, **k: pytest.skip("needs a download")))


def pytest_configure(config):
    os.environ["LLAMA_SERVER_BIN_PATH"] = os.path.join(HERE, "sift-as-llama-server")
    import utils  # the suite's own, from its directory (rootdir)

    utils.ServerPreset.load_all = staticmethod(lambda: None)
    start = utils.ServerProcess.start

    def start_local(self, *a, **k):
        if self.model_file is None and (self.model_hf_repo or self.model_hf_file):
            path = local_model(self.model_hf_repo, self.model_hf_file)
            if path is None:
                pytest.skip(f"needs model {self.model_hf_repo} {self.model_hf_file or ''} (not in ../shared/models)".rstrip())
            os.environ["SIFT_SUITE_MODEL"] = path
        elif self.model_file is None:
            fill_cache()  # router mode: what load_all would have downloaded
            os.environ.pop("SIFT_SUITE_MODEL", None)  # (an earlier test's model: no -m for a router)
        if self.model_draft:
            pytest.skip(f"needs draft model {self.model_draft}")
        if self.mmproj_url:
            pytest.skip("needs a vision projector (mmproj)")
        if self.lora_files:
            pytest.skip("needs LoRA adapters we do not have")
        return start(self, *a, **k)

    utils.ServerProcess.start = start_local
