"""The built-in AI/ML tool profiles (round 2): each one's own facts, resolved with hand-built
hosts: default paths per OS, the tool's own variable, relocation, clean command and units."""

from __future__ import annotations

import pytest

from cachedoctor.profiles.model import (
    ContentAddressedUnits,
    EntryUnits,
    EnvRelocation,
    Location,
)
from cachedoctor.resolve import expand
from tests.test_profile_library import HOSTS, PROFILES, first, host, paths

AI_TOOLS = {
    "lmstudio", "llama.cpp", "comfyui", "a1111", "keras", "tfhub", "tensorflow-datasets", "jax",
    "whisper", "sentence-transformers", "nltk", "scikit-learn", "pyg", "modelscope", "kagglehub",
    "gpt4all", "wandb", "codex", "gemini",
}
IDE_TOOLS = {"jupyter", "ipython"}
NEW_TOOLS = AI_TOOLS | IDE_TOOLS


def loc(tool: str, location: str) -> Location:
    return PROFILES[tool].location(location)


def env_vars(tool: str, location: str) -> dict[str, str]:
    """All variables set by the location's env relocations."""
    found: dict[str, str] = {}
    for method in loc(tool, location).relocate:
        if isinstance(method, EnvRelocation):
            found.update(method.vars)
    return found


def steps(tool: str, location: str, os_name: str) -> str:
    how = loc(tool, location).how_to_move
    assert how is not None, f"{tool}/{location} has no how_to_move"
    return " ".join(how.for_host(HOSTS[os_name]))


# --- the set as a whole ---------------------------------------------------------------------------

def test_all_new_profiles_exist_with_their_category() -> None:
    assert set(PROFILES) >= NEW_TOOLS
    for tool in AI_TOOLS:
        assert PROFILES[tool].category == "ai", tool
    for tool in IDE_TOOLS:
        assert PROFILES[tool].category == "ide", tool


@pytest.mark.parametrize("tool", sorted(NEW_TOOLS))
def test_sources_are_urls_and_new_profiles_add_no_generic_checks(tool: str) -> None:
    profile = PROFILES[tool]
    assert profile.sources
    assert all(s.startswith("https://") for s in profile.sources), profile.sources
    assert profile.checks == []  # the engine's generic checks cover these locations


def test_aliases_are_the_names_users_type_and_clash_with_nothing() -> None:
    assert PROFILES["a1111"].aliases == ["automatic1111"]
    assert PROFILES["tensorflow-datasets"].aliases == ["tfds"]
    assert PROFILES["scikit-learn"].aliases == ["sklearn"]
    names = [p.id for p in PROFILES.values()] + [a for p in PROFILES.values() for a in p.aliases]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("tool", sorted(NEW_TOOLS))
def test_every_env_relocation_names_a_variable_of_the_path(tool: str) -> None:
    """A variable cachedoctor sets must be one the location's own path template reads (else the
    engine could not tell that the move took effect) -- except NLTK_DATA, a search-path list."""
    for location in PROFILES[tool].locations:
        for var in env_vars(tool, location.id):
            if var == "NLTK_DATA":
                continue
            for os_name in ("linux", "macos", "windows"):
                templates = location.paths.for_host(HOSTS[os_name])
                assert any(var in t for t in templates), (tool, location.id, var, os_name)


# --- LM Studio ----------------------------------------------------------------------------------

def test_lmstudio_models_folder_current_and_legacy() -> None:
    assert paths("lmstudio", "models", host("linux")) == [
        "/home/ann/.lmstudio/models", "/home/ann/.cache/lm-studio/models"]
    assert first("lmstudio", "models", host("macos")) == "/Users/ann/.lmstudio/models"
    assert paths("lmstudio", "models", host("windows")) == [
        r"C:\Users\ann\.lmstudio\models", r"C:\Users\ann\.cache\lm-studio\models"]


def test_lmstudio_moves_in_its_ui_and_is_never_cleaned_wholesale() -> None:
    models = loc("lmstudio", "models")
    assert models.kind == "models" and not models.safe_to_delete
    assert models.relocate == [] and models.clean is None
    assert models.units == [EntryUnits(under="*")]
    for os_name in ("linux", "macos", "windows"):
        assert "My Models" in steps("lmstudio", "models", os_name)


# --- llama.cpp ----------------------------------------------------------------------------------

def test_llama_cpp_default_cache_per_os() -> None:
    assert first("llama.cpp", "cache", host("linux")) == "/home/ann/.cache/llama.cpp"
    assert first("llama.cpp", "cache", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/llama.cpp"
    assert first("llama.cpp", "cache", host("macos")) == "/Users/ann/Library/Caches/llama.cpp"
    assert first("llama.cpp", "cache", host("windows")) == r"C:\Users\ann\AppData\Local\llama.cpp"


def test_llama_cache_variable_wins_and_relocates() -> None:
    assert first("llama.cpp", "cache", host("linux", LLAMA_CACHE="/models/gguf")) == "/models/gguf"
    assert first("llama.cpp", "cache", host("windows", LLAMA_CACHE=r"D:\gguf")) == r"D:\gguf"
    assert env_vars("llama.cpp", "cache") == {"LLAMA_CACHE": "{dest}"}
    cache = loc("llama.cpp", "cache")
    assert cache.safe_to_delete and cache.clean is None
    assert cache.units == []  # flat files in old builds, hub layout in new ones
    assert "hub layout" in " ".join(PROFILES["llama.cpp"].notes)


# --- ComfyUI and AUTOMATIC1111 -------------------------------------------------------------------

def test_comfyui_desktop_and_comfy_cli_folders() -> None:
    assert paths("comfyui", "models", host("windows")) == [
        r"C:\Users\ann\Documents\ComfyUI\models", r"C:\Users\ann\comfy\ComfyUI\models"]
    assert paths("comfyui", "models", host("macos")) == [
        "/Users/ann/Documents/ComfyUI/models", "/Users/ann/comfy/ComfyUI/models"]
    assert paths("comfyui", "models", host("linux")) == [
        "/home/ann/comfy/ComfyUI/models", "/home/ann/ComfyUI/models"]


def test_comfyui_moves_with_extra_model_paths_not_a_cachedoctor_method() -> None:
    models = loc("comfyui", "models")
    assert models.relocate == [] and not models.safe_to_delete
    for os_name in ("linux", "macos", "windows"):
        text = steps("comfyui", "models", os_name)
        assert "extra_model_paths.yaml" in text and "base_path" in text and "is_default" in text
        assert "extra_models_config.yaml" in text  # ComfyUI Desktop's file


def test_a1111_models_folder_and_commandline_args() -> None:
    assert paths("a1111", "models", host("linux")) == [
        "/home/ann/stable-diffusion-webui/models", "/home/ann/stable-diffusion-webui-forge/models"]
    assert first("a1111", "models", host("windows")) == r"C:\Users\ann\stable-diffusion-webui\models"
    models = loc("a1111", "models")
    assert models.relocate == [] and not models.safe_to_delete
    assert "webui-user.bat" in steps("a1111", "models", "windows")
    for os_name in ("linux", "macos", "windows"):
        text = steps("a1111", "models", os_name)
        assert "COMMANDLINE_ARGS" in text and "--ckpt-dir" in text and "--data-dir" in text


# --- Keras, TF Hub, TFDS, JAX -------------------------------------------------------------------

def test_keras_home_and_its_settings_file_is_kept() -> None:
    assert first("keras", "home", host("linux")) == "/home/ann/.keras"
    assert first("keras", "home", host("macos")) == "/Users/ann/.keras"
    assert first("keras", "home", host("windows")) == r"C:\Users\ann\.keras"
    assert first("keras", "home", host("linux", KERAS_HOME="/data/keras")) == "/data/keras"
    assert env_vars("keras", "home") == {"KERAS_HOME": "{dest}"}
    clean = loc("keras", "home").clean
    assert clean is not None and "keras.json" in clean.keep


def test_tfhub_defaults_to_the_temp_folder() -> None:
    assert first("tfhub", "cache", host("linux")) == "/tmp/tfhub_modules"
    assert first("tfhub", "cache", host("macos", TMPDIR="/var/folders/x/T")) == (
        "/var/folders/x/T/tfhub_modules")
    assert first("tfhub", "cache", host("windows")) == (
        r"C:\Users\ann\AppData\Local\Temp\tfhub_modules")
    assert first("tfhub", "cache", host("linux", TFHUB_CACHE_DIR="/c/tfhub")) == "/c/tfhub"
    assert env_vars("tfhub", "cache") == {"TFHUB_CACHE_DIR": "{dest}"}


def test_tfds_data_dir_keeps_manual_downloads() -> None:
    assert first("tensorflow-datasets", "data", host("linux")) == "/home/ann/tensorflow_datasets"
    assert first("tensorflow-datasets", "data", host("windows")) == r"C:\Users\ann\tensorflow_datasets"
    assert first("tensorflow-datasets", "data", host("macos", TFDS_DATA_DIR="/d/tfds")) == "/d/tfds"
    assert env_vars("tensorflow-datasets", "data") == {"TFDS_DATA_DIR": "{dest}"}
    data = loc("tensorflow-datasets", "data")
    assert data.kind == "data" and data.clean is not None
    assert data.clean.keep == ["downloads/manual/**"]


def test_jax_cache_is_off_unless_configured() -> None:
    assert first("jax", "compilation-cache", host("linux", JAX_COMPILATION_CACHE_DIR="/x/jax")) == "/x/jax"
    # Without the variable: the folder the JAX docs use in their examples.
    assert first("jax", "compilation-cache", host("linux")) == "/tmp/jax_cache"
    assert first("jax", "compilation-cache", host("windows")) == (
        r"C:\Users\ann\AppData\Local\Temp\jax_cache")
    assert env_vars("jax", "compilation-cache") == {"JAX_COMPILATION_CACHE_DIR": "{dest}"}
    notes = " ".join(PROFILES["jax"].notes)
    assert "Off unless configured" in notes and "trusted" in notes


# --- Whisper, sentence-transformers, NLTK, scikit-learn, PyG ---------------------------------------

def test_whisper_follows_xdg_cache_home_on_every_os() -> None:
    assert first("whisper", "models", host("linux")) == "/home/ann/.cache/whisper"
    assert first("whisper", "models", host("macos")) == "/Users/ann/.cache/whisper"
    assert first("whisper", "models", host("windows")) == r"C:\Users\ann\.cache\whisper"
    assert first("whisper", "models", host("macos", XDG_CACHE_HOME="/xdg")) == "/xdg/whisper"
    assert loc("whisper", "models").relocate == []  # no variable of its own


def test_sentence_transformers_home_and_legacy_torch_folder() -> None:
    assert first("sentence-transformers", "cache", host("linux")) == (
        "/home/ann/.cache/torch/sentence_transformers")
    assert first("sentence-transformers", "cache", host("linux", TORCH_HOME="/t")) == (
        "/t/sentence_transformers")
    assert first("sentence-transformers", "cache", host("windows")) == (
        r"C:\Users\ann\.cache\torch\sentence_transformers")
    with_home = host("linux", SENTENCE_TRANSFORMERS_HOME="/st", TORCH_HOME="/t")
    assert first("sentence-transformers", "cache", with_home) == "/st"
    assert env_vars("sentence-transformers", "cache") == {"SENTENCE_TRANSFORMERS_HOME": "{dest}"}
    assert loc("sentence-transformers", "cache").units == []
    assert "Hugging Face hub layout" in " ".join(PROFILES["sentence-transformers"].notes)


def test_nltk_data_per_os_is_user_data() -> None:
    assert paths("nltk", "data", host("windows")) == [
        r"C:\Users\ann\AppData\Roaming\nltk_data", r"C:\Users\ann\nltk_data"]
    assert first("nltk", "data", host("linux")) == "/home/ann/nltk_data"
    assert first("nltk", "data", host("macos")) == "/Users/ann/nltk_data"
    data = loc("nltk", "data")
    assert data.kind == "data" and not data.safe_to_delete
    assert env_vars("nltk", "data") == {"NLTK_DATA": "{dest}"}


def test_scikit_learn_data_home() -> None:
    assert first("scikit-learn", "data-home", host("linux")) == "/home/ann/scikit_learn_data"
    assert first("scikit-learn", "data-home", host("windows")) == r"C:\Users\ann\scikit_learn_data"
    assert first("scikit-learn", "data-home", host("linux", SCIKIT_LEARN_DATA="/sk")) == "/sk"
    assert env_vars("scikit-learn", "data-home") == {"SCIKIT_LEARN_DATA": "{dest}"}
    assert loc("scikit-learn", "data-home").safe_to_delete


def test_pyg_home_ignores_xdg() -> None:
    assert first("pyg", "home", host("linux")) == "/home/ann/.cache/pyg"
    assert first("pyg", "home", host("linux", XDG_CACHE_HOME="/xdg")) == "/home/ann/.cache/pyg"
    assert first("pyg", "home", host("windows")) == r"C:\Users\ann\.cache\pyg"
    assert first("pyg", "home", host("linux", PYG_HOME="/pyg")) == "/pyg"
    assert env_vars("pyg", "home") == {"PYG_HOME": "{dest}"}


# --- ModelScope, kagglehub, GPT4All, W&B -------------------------------------------------------------

def test_modelscope_cache_root() -> None:
    assert first("modelscope", "cache", host("linux")) == "/home/ann/.cache/modelscope"
    assert first("modelscope", "cache", host("windows")) == r"C:\Users\ann\.cache\modelscope"
    assert first("modelscope", "cache", host("macos", MODELSCOPE_CACHE="/ms")) == "/ms"
    assert env_vars("modelscope", "cache") == {"MODELSCOPE_CACHE": "{dest}"}


def test_kagglehub_cache_and_whole_resource_units() -> None:
    assert first("kagglehub", "cache", host("linux")) == "/home/ann/.cache/kagglehub"
    assert first("kagglehub", "cache", host("windows")) == r"C:\Users\ann\.cache\kagglehub"
    assert first("kagglehub", "cache", host("linux", KAGGLEHUB_CACHE="/kh")) == "/kh"
    assert env_vars("kagglehub", "cache") == {"KAGGLEHUB_CACHE": "{dest}"}
    unders = {u.under for u in loc("kagglehub", "cache").units if isinstance(u, EntryUnits)}
    assert unders == {"datasets/*", "models/*", "competitions", "notebooks/*"}


def test_gpt4all_desktop_path_and_python_cache() -> None:
    assert first("gpt4all", "desktop", host("windows")) == (
        r"C:\Users\ann\AppData\Local\nomic.ai\GPT4All")
    assert first("gpt4all", "desktop", host("macos")) == (
        "/Users/ann/Library/Application Support/nomic.ai/GPT4All")
    assert first("gpt4all", "desktop", host("linux")) == "/home/ann/.local/share/nomic.ai/GPT4All"
    assert first("gpt4all", "python", host("linux")) == "/home/ann/.cache/gpt4all"
    assert first("gpt4all", "python", host("windows")) == r"C:\Users\ann\.cache\gpt4all"
    desktop, python = loc("gpt4all", "desktop"), loc("gpt4all", "python")
    assert not desktop.safe_to_delete  # chats and LocalDocs databases sit with the models
    assert python.safe_to_delete
    assert "Download Path" in steps("gpt4all", "desktop", "windows")


def test_wandb_artifact_cache_and_staging() -> None:
    assert first("wandb", "cache", host("linux")) == "/home/ann/.cache/wandb"
    assert first("wandb", "cache", host("windows")) == r"C:\Users\ann\.cache\wandb"
    assert first("wandb", "cache", host("linux", WANDB_CACHE_DIR="/wb")) == "/wb"
    cache = loc("wandb", "cache")
    assert env_vars("wandb", "cache") == {"WANDB_CACHE_DIR": "{dest}"}
    assert cache.clean is not None
    assert cache.clean.command == ["wandb", "artifact", "cache", "cleanup", "--remove-temp", "0GB"]
    assert cache.units == [ContentAddressedUnits(under=".")]
    assert first("wandb", "staging", host("linux")) == "/home/ann/.cache/wandb-data"
    assert first("wandb", "staging", host("linux", WANDB_DATA_DIR="/stage")) == "/stage"
    staging = loc("wandb", "staging")
    assert staging.kind == "temp" and not staging.safe_to_delete
    assert env_vars("wandb", "staging") == {"WANDB_DATA_DIR": "{dest}"}


# --- Codex CLI and Gemini CLI ---------------------------------------------------------------------

def test_codex_home_sessions_and_log() -> None:
    assert first("codex", "home", host("linux")) == "/home/ann/.codex"
    assert first("codex", "home", host("windows")) == r"C:\Users\ann\.codex"
    assert first("codex", "sessions", host("macos")) == "/Users/ann/.codex/sessions"
    assert first("codex", "logs", host("linux")) == "/home/ann/.codex/log"
    moved = host("linux", CODEX_HOME="/data/codex")
    assert first("codex", "sessions", moved) == "/data/codex/sessions"
    assert first("codex", "logs", moved) == "/data/codex/log"
    assert env_vars("codex", "home") == {"CODEX_HOME": "{dest}"}
    assert not loc("codex", "home").safe_to_delete
    assert not loc("codex", "sessions").safe_to_delete
    assert loc("codex", "sessions").units == [EntryUnits(under="*/*")]
    assert loc("codex", "logs").safe_to_delete and loc("codex", "logs").kind == "logs"


def test_gemini_tmp_holds_sessions_and_its_retention_preset() -> None:
    assert first("gemini", "tmp", host("linux")) == "/home/ann/.gemini/tmp"
    assert first("gemini", "tmp", host("windows")) == r"C:\Users\ann\.gemini\tmp"
    tmp = loc("gemini", "tmp")
    assert tmp.kind == "data" and not tmp.safe_to_delete
    preset = PROFILES["gemini"].preset("session-retention")
    assert preset.format == "jsonc" and preset.file is not None
    assert [expand(t, host("linux")) for t in preset.file.for_host(host("linux"))] == [
        "/home/ann/.gemini/settings.json"]
    assert {tuple(s.key): s.value for s in preset.settings if isinstance(s.key, list)} == {
        ("general", "sessionRetention", "enabled"): True,
        ("general", "sessionRetention", "maxAge"): "30d",
    }


# --- Jupyter and IPython ---------------------------------------------------------------------------

def test_jupyter_runtime_dir_per_os() -> None:
    assert first("jupyter", "runtime", host("linux")) == "/home/ann/.local/share/jupyter/runtime"
    assert first("jupyter", "runtime", host("linux", XDG_DATA_HOME="/xd")) == "/xd/jupyter/runtime"
    assert first("jupyter", "runtime", host("macos")) == "/Users/ann/Library/Jupyter/runtime"
    assert first("jupyter", "runtime", host("windows")) == (
        r"C:\Users\ann\AppData\Roaming\jupyter\runtime")


def test_jupyter_runtime_variable_beats_data_dir() -> None:
    assert first("jupyter", "runtime", host("linux", JUPYTER_DATA_DIR="/jd")) == "/jd/runtime"
    both = host("windows", JUPYTER_DATA_DIR=r"D:\jd", JUPYTER_RUNTIME_DIR=r"D:\rt")
    assert first("jupyter", "runtime", both) == r"D:\rt"
    runtime = loc("jupyter", "runtime")
    assert env_vars("jupyter", "runtime") == {"JUPYTER_RUNTIME_DIR": "{dest}"}
    assert runtime.ask is not None and runtime.ask.command == ["jupyter", "--runtime-dir"]
    assert runtime.kind == "temp" and runtime.safe_to_delete
    assert PROFILES["jupyter"].processes_for("linux")  # clean waits for running servers


def test_ipython_dir_is_not_a_cache() -> None:
    assert first("ipython", "home", host("linux")) == "/home/ann/.ipython"
    assert first("ipython", "home", host("windows")) == r"C:\Users\ann\.ipython"
    assert first("ipython", "home", host("macos", IPYTHONDIR="/ipy")) == "/ipy"
    home = loc("ipython", "home")
    assert home.kind == "data" and not home.safe_to_delete and home.clean is None
    assert env_vars("ipython", "home") == {"IPYTHONDIR": "{dest}"}
    assert home.ask is not None and home.ask.command == ["ipython", "locate"]
    assert "history" in " ".join(PROFILES["ipython"].notes)


def test_ipython_cache_dir_on_linux_only() -> None:
    assert first("ipython", "cache", host("linux")) == "/home/ann/.cache/ipython"
    assert first("ipython", "cache", host("wsl", XDG_CACHE_HOME="/xdg")) == "/xdg/ipython"
    assert paths("ipython", "cache", host("macos")) == []
    assert paths("ipython", "cache", host("windows")) == []
    assert loc("ipython", "cache").safe_to_delete
