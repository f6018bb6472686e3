# Turbo-GMM artifact. Two commands do everything on a fresh machine:
#   make reproduce   every experiment of the paper on a GPU (or the CPU smoke sweep), then its tables,
#                    figures and the claims report
#   make test        the test suite (CPU; Triton kernels run in the interpreter), then the packaging
#                    checks: make wheel-test, make lowest-test, make docs
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
# The exact versions of the CPU/CI environment: one file, constraints.txt (pyproject.toml has the ranges).
CONSTRAINTS := constraints.txt
pin = $(shell grep -m1 '^$(1)==' $(CONSTRAINTS))
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(CONSTRAINTS) Makefile | cksum | cut -d' ' -f1)
TORCHGMM := $(call pin,torchgmm)
FLASH_GMM_REPO ?= https://github.com/IBM/Flash-GMM.git
FLASH_GMM_COMMIT ?= f3077ffe5d7e2522b9a1db8be1698ca5435d9609
# make wheelhouse: wheels a GPU node without network needs beyond its image. The default set
# is what the H200 image lacks (small); ALL=1 adds everything else a bare CUDA-torch image needs.
PY ?= 3.12
PLATFORM ?= manylinux_2_28_x86_64
WHEELHOUSE ?= wheelhouse
WHEELS_MIN := $(foreach p,hydra-core omegaconf antlr4-python3-runtime gmmx pomegranate apricot-select nose \
  nvidia-ml-py hydra-joblib-launcher hydra-submitit-launcher submitit cloudpickle pytest-xdist execnet hypothesis \
  sortedcontainers attrs flash-kmeans,$(call pin,$(p)))
WHEELS_ALL := $(WHEELS_MIN) $(foreach p,pyyaml numba llvmlite networkx tqdm psutil mpmath pandas python-dateutil \
  tzdata matplotlib contourpy cycler kiwisolver fonttools pillow pyparsing scikit-learn scipy joblib threadpoolctl \
  pytest iniconfig pluggy pygments packaging pytorch-lightning torchmetrics lightning-utilities fsspec \
  typing-extensions,$(call pin,$(p)))
WHEELS := $(if $(ALL),$(WHEELS_ALL),$(WHEELS_MIN))
# cuVS's C++ libraries for the cuvs arm (~300 MB; CUVS=0 leaves them out). install-offline puts
# them in $(CUVS_SITE) with --target, outside the environment torch runs in (its nvJitLink is
# older, arms/README.md); arms/cuvs.py looks there (or in $$TURBO_GMM_CUVS_SITE).
CUVS ?= 1
CUVS_SITE ?= .venv/cuvs-site
WHEELS_CUVS := libcuvs-cu13==26.10.0 libraft-cu13==26.10.0 librmm-cu13==26.10.0 libkvikio-cu13==26.10.0 \
  rapids-logger==0.3.0 nvidia-nvjitlink==13.5.37
SDIST_ONLY := $(call pin,antlr4-python3-runtime) $(call pin,apricot-select)
HAS_CUDA_TORCH := $(shell $(PYTHON) -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && echo yes)
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)

.PHONY: venv test wheel-test lowest-test docs gpu-test gpu-test-main gpu-test-portable reproduce figures baselines wheelhouse install-offline clean

venv: $(STAMP)

# A GPU node keeps the CUDA torch/jax/triton of its image (the venv sees them); elsewhere
# the CPU build of torch 2.13.0 and every package at its constraints.txt version are installed into
# .venv, turbo_gmm editable (pip install -e: kernels/ is the package turbo_gmm).
# `python -m venv --system-site-packages` links the *base* interpreter's packages only: where
# $(PYTHON) is itself a virtual environment (the H200 image's python3), its own torch, triton,
# jax, numpy and PyYAML would be invisible. So .venv gets a .pth that adds every site directory
# of $(PYTHON) (addsitedir: their own .pth files are processed too), after .venv's own.
$(STAMP):
ifeq ($(HAS_CUDA_TORCH),yes)
	$(PYTHON) -m venv --system-site-packages $(VENV)
	@site=$$($(VPY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
	$(PYTHON) -c "import sys; [print(f'import site; site.addsitedir({p!r})') for p in sys.path \
	  if p.endswith(('site-packages', 'dist-packages'))]" > $$site/parent-environment.pth && \
	echo "$$site/parent-environment.pth: $(VENV) sees $$(grep -c addsitedir $$site/parent-environment.pth) site directories of $(PYTHON)"
	@# turbo_gmm importable from anywhere, edits seen at once (what pip install -e gives): a symlink
	@# site-packages/turbo_gmm -> kernels/, the package-dir mapping of pyproject.toml. Not an editable
	@# install: that needs setuptools >= 77 (the image may have an older one, and a node without network
	@# a wheel of it) and a build; the link needs neither. turbo_gmm.__version__ still says the version.
	@site=$$($(VPY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
	ln -sfn $(CURDIR)/kernels $$site/turbo_gmm && echo "$$site/turbo_gmm -> $(CURDIR)/kernels"
	@if [ -d $(WHEELHOUSE) ]; then $(MAKE) install-offline PYTHON=$(abspath $(VPY)); \
	 else echo "no $(WHEELHOUSE)/: using the image's packages as they are (see make wheelhouse)"; fi
else
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --upgrade pip
	$(VPY) -m pip install -c $(CONSTRAINTS) -e '.[bench,arms,launchers,test,docs]'
	$(VPY) -m pip install -c $(CONSTRAINTS) --no-deps $(TORCHGMM)
endif
	rm -f $(VENV)/.installed-*
	touch $@

# TEST_JOBS pytest-xdist workers (the CI machine's two cores): 22.5 min against 35.8 min in one process
TEST_JOBS ?= 2
test: venv
	TRITON_INTERPRET=1 $(VPY) -m pytest -q -n $(TEST_JOBS) --dist worksteal kernels arms gate harness figures
	$(MAKE) --no-print-directory wheel-test lowest-test docs

# The packaging checks (.ci/packaging_check.py; fresh venvs under $(PACKAGING_DIR), outside the repository):
#   wheel-test   build the sdist and the wheel from this tree, check the wheel holds one package, turbo_gmm
#                (every module of kernels/, no tests/ or docs/), install it (not editable) with the constraints
#                into a fresh venv, fit iris there from outside the repository as scikit-learn does, then
#                install PyPI's `kernels` beside it and fit again
#   lowest-test  a fresh venv with the lower bounds of pyproject.toml's dependencies (torch: 2.13.0, the CPU
#                build) and turbo_gmm editable, then LOWEST_TESTS (a GaussianMixture fit against
#                scikit-learn's, the kernels' EM against the float64 and 60-digit references)
#   docs         the Sphinx API reference and user guide (kernels/docs/), warnings as errors; -E: every page is
#                read again (an incremental build would not repeat the warnings of unchanged pages)
PACKAGING_DIR ?= $(or $(TMPDIR),/tmp)/turbo-gmm-packaging
LOWEST_TESTS ?= kernels/tests/test_estimator.py::test_the_default_is_scikit_learns_full_covariance \
  kernels/tests/test_estimator.py::test_real_datasets_agree_with_scikit_learn_for_every_covariance_type \
  kernels/tests/test_em.py::test_fit_agrees_with_scikit_learn kernels/tests/test_em.py::test_fit_follows_float64_em \
  kernels/tests/test_exact.py::test_matches_60_digit_reference
DOCS_OUT ?= kernels/docs/_build
wheel-test: venv
	$(VPY) .ci/packaging_check.py wheel --work $(PACKAGING_DIR)
lowest-test: venv
	$(VPY) .ci/packaging_check.py lowest --work $(PACKAGING_DIR) $(LOWEST_TESTS)
docs: venv
	$(VPY) -m sphinx -E -W --keep-going -q -b html kernels/docs $(DOCS_OUT)/html
	@echo "make docs: $(DOCS_OUT)/html/index.html"

# make gpu-test on a GPU node: the kernel, arm, gate and study tests compiled on the device (the gpu-marked
# ones run), over GPU_TEST_JOBS pytest-xdist workers that steal tests from each other (compiles are CPU-bound:
# the suite in four serial processes ran past 470 s on the H200; test_estimator.py alone takes 205 s in one
# process, so with a file per worker the others sit idle behind it), then the portable path over the kernel tests
# (TURBO_GMM_HOPPER_KERNELS=0, the Hopper-only kernels off: what an A100 runs). The two halves are targets of
# their own (gpu-test-main, gpu-test-portable: ~6 and ~4 min on an H100), each within a 10-minute job limit.
# Logs: results/<device>/gpu_tests{,_portable}_<date>_<commit>.log, the commit as harness.env.git_commit names it.
GPU_TEST_JOBS ?= 12
GPU_TESTS := kernels/tests gate arms/tests harness/tests/studies
GPU_TEST_LOG = results/$$dev/gpu_tests$(1)_$$(date +%F)_$$($(VPY) -c "from harness.env import git_commit; print(git_commit()[:7])").log
gpu-test: gpu-test-main gpu-test-portable
NO_GPU_STOP = echo "make $@ runs the suite compiled on a GPU, and this machine has none (nvidia-smi -L): make test runs it here"; exit 2
gpu-test-main: venv
ifneq ($(HAS_GPU),yes)
	@$(NO_GPU_STOP)
endif
	@dev=$(DEVICE_LABEL); log=$(call GPU_TEST_LOG,); mkdir -p results/$$dev; \
	echo "make $@: $(GPU_TESTS) on $$dev, $(GPU_TEST_JOBS) workers -> $$log"; \
	$(VPY) -m pytest -q -p no:cacheprovider -rfE -n $(GPU_TEST_JOBS) --dist worksteal $(GPU_TESTS) > $$log 2>&1; rc=$$?; \
	tail -3 $$log; exit $$rc
gpu-test-portable: venv
ifneq ($(HAS_GPU),yes)
	@$(NO_GPU_STOP)
endif
	@dev=$(DEVICE_LABEL); log=$(call GPU_TEST_LOG,_portable); mkdir -p results/$$dev; \
	echo "make $@: kernels/tests without the Hopper kernels on $$dev, $(GPU_TEST_JOBS) workers -> $$log"; \
	TURBO_GMM_HOPPER_KERNELS=0 $(VPY) -m pytest -q -p no:cacheprovider -rfE -n $(GPU_TEST_JOBS) --dist worksteal \
	  -k "not _ws" kernels/tests > $$log 2>&1; rc=$$?; tail -3 $$log; exit $$rc

# make reproduce on a GPU: every experiment of the paper, resumably (a finished cell or CSV is
# skipped; FORCE=1 redoes them and re-measures env.json), then every table, figure and the claims
# report. Each experiment's cells go to the longest_first sweeper (long cells first, the small-N
# cells last and one at a time, with the other GPUs idle); on a node with several GPUs, over all of
# them (gpu_joblib, one job per GPU; GPUS=0,1 restricts the pool), on one GPU one after another.
EXPERIMENTS := table1 dispatch ablation d128_control d128_published
DEVICE_LABEL = $$($(VPY) -c "from harness.env import device_label; print(device_label())")
reproduce: venv
ifeq ($(HAS_GPU),yes)
	@$(if $(GPUS),export CUDA_VISIBLE_DEVICES=$(GPUS);) \
	dev=$(DEVICE_LABEL); start=$$(date +%s); \
	gpus=$$($(VPY) -m harness.gpu_pool --list); ngpus=$$(echo "$$gpus" | tr ',' '\n' | grep -c .); \
	sweep="hydra/sweeper=longest_first $$($(VPY) -m harness.gpu_pool)"; \
	echo "make reproduce on $$dev, $$ngpus GPU(s) ($$gpus) -> results/$$dev/ (a cell with a record is skipped, FORCE=1 redoes it):"; \
	$(VPY) -m harness.plan $(EXPERIMENTS) --gpus $$ngpus $(if $(FORCE),force=true) || exit 1; \
	echo "  then: exactness (mpmath + float64 battery), conditioning (lifted vs centered score), figures, claims.md"; \
	$(if $(FORCE),rm -f results/$$dev/env.json;) \
	for exp in $(EXPERIMENTS); do \
	  echo "== $$exp: python -m harness -m experiment=$$exp $$sweep"; \
	  $(VPY) -m harness -m experiment=$$exp $$sweep $(if $(FORCE),force=true) || exit 1; \
	done; \
	for mod in exactness conditioning; do \
	  out=results/$$dev/$$mod.csv; \
	  if [ -f $$out ] && [ -z "$(FORCE)" ]; then echo "== $$mod: $$out exists, skipped (FORCE=1 redoes it)"; \
	  else echo "== $$mod: python -m harness.studies.$$mod --out $$out"; $(VPY) -m harness.studies.$$mod --out $$out || exit 1; fi; \
	done; \
	$(MAKE) --no-print-directory figures; \
	secs=$$(( $$(date +%s) - start )); \
	echo "make reproduce took $$((secs / 60)) min $$((secs % 60)) s (wall clock) on $$ngpus GPU(s) ($$gpus). Outputs in results/$$dev/:"; \
	echo "  CSVs: $(addsuffix .csv,$(EXPERIMENTS)) exactness.csv conditioning.csv (+ cells/ records, env.json)"; \
	echo "  tables: table1.md table1.tex; figures (.png/.pdf): fig1_latency fig_memory fig_dispatch fig2_ablation fig_conditioning"; \
	echo "  claims: results/$$dev/claims.md"; \
	echo "  compilation caches (not committed; delete for a cold run):"; $(VPY) -m harness.caches results/$$dev
else
	@echo "No GPU: CPU smoke sweep (small shapes, CPU-capable arms; Turbo-GMM in the Triton interpreter) -> results/$$(hostname)-cpu/smoke.csv, then its table and figure"
	TRITON_INTERPRET=1 $(VPY) -m harness -m experiment=smoke
	$(MAKE) --no-print-directory figures
endif

# Every table, figure and claims.md from the CSVs under results/ (no GPU needed).
figures: venv
	$(VPY) -m figures.render_all results

baselines:
	@if [ ! -d third_party/Flash-GMM/.git ]; then \
	  mkdir -p third_party && git clone $(FLASH_GMM_REPO) third_party/Flash-GMM; fi
	git -C third_party/Flash-GMM fetch --quiet origin 2>/dev/null || true
	git -C third_party/Flash-GMM checkout --quiet $(FLASH_GMM_COMMIT)
	@echo "Flash-GMM at $$(git -C third_party/Flash-GMM rev-parse HEAD)"

wheelhouse:
	mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download --no-deps --only-binary=:all: --python-version $(PY) --platform $(PLATFORM) \
	  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2010_x86_64 -d $(WHEELHOUSE) \
	  $(filter-out $(SDIST_ONLY),$(WHEELS)) $(TORCHGMM) $(if $(filter 1,$(CUVS)),$(WHEELS_CUVS))
	$(PYTHON) -m pip wheel --no-deps -w $(WHEELHOUSE) $(SDIST_ONLY)
	@echo "$(WHEELHOUSE)/ holds $$(ls $(WHEELHOUSE) | wc -l) wheels for Python $(PY) on $(PLATFORM)"

# On the GPU node: the image's torch, triton, jax and numpy stay; the rest comes from the
# wheelhouse. turbo_gmm itself is the repository's kernels/ (make venv links it into the venv).
install-offline:
	$(PYTHON) -m pip install --no-index --find-links $(WHEELHOUSE) --no-deps $(WHEELS) $(TORCHGMM)
	@if ls $(WHEELHOUSE)/libcuvs_cu13-*.whl >/dev/null 2>&1; then \
	  echo "$(PYTHON) -m pip install ... --target $(CUVS_SITE) <cuVS wheels>"; \
	  $(PYTHON) -m pip install --no-index --find-links $(WHEELHOUSE) --no-deps --upgrade --target $(CUVS_SITE) $(WHEELS_CUVS); \
	else echo "no cuVS wheels in $(WHEELHOUSE)/: the cuvs arm will say unavailable"; fi

clean:
	rm -rf .hydra_runs .pytest_cache build *.egg-info $(DOCS_OUT) kernels/docs/generated $(PACKAGING_DIR) dist
	find . -name __pycache__ -prune -exec rm -rf {} +
