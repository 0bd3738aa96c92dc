#!/bin/bash
# tests/gpu/torch-examples-device.sh - on a GPU machine: Hugging Face's SageMaker paths and the torch examples on CUDA, against gloo.
#
# What make check runs on CPU tensors, on the GPU: 2 ranks sharing GPU 0
# (or one GPU each, where there are two), each job beside the same job on
# gloo. Takes a libsmddp build made elsewhere with ../configure --with-cuda
# (B, default build-cuda/, carried with the working tree) and the libraries
# the GPU machine lacks (libcjson.so.1) in .devcarry/, as
# lab/gpu/run-on-device.sh does; needs python3 with torch (CUDA), and
# transformers and accelerate for the hf stage. No network.
#
# Usage: tests/gpu/torch-examples-device.sh [STAGE...]
#   build     the backend (python/) built against B and this torch into a
#             folder: pip install --no-build-isolation with SMDDP_TORCH_CUDA=1,
#             as run-on-device.sh's torch stage (the other stages need it)
#   hf        python/tests/test_hf.py: the Trainer's and Accelerate's SageMaker
#             paths on smddp, DEVICE=cuda, against the same jobs on gloo on the
#             same GPU (deterministic algorithms), bit for bit (hf_compare.py)
#   fsdp      examples/torch/fsdp.py on the GPU against the same on gloo on the
#             CPU, within a relative 1e-4 (GPU and CPU round matrix products
#             differently; smddp on the CPU matches gloo bit for bit in make check)
#   pipeline  examples/torch/pipeline.py, 1F1B, 2 stages, likewise
#   ddp       examples/torch/ddp.py on the GPU, smddp against gloo on the GPU
#             (DDP over gloo reduces CUDA tensors through host memory)
#   pip-cuda  `pip install --no-build-isolation` of a copy of the tree as a user
#             runs it, SMDDP_TORCH_CUDA=1: libsmddp built --with-cuda by pip and
#             bundled (SMDDP_BUNDLE=1), cJSON from CARRY (libcjson.so.1, and
#             include/cjson/cJSON.h: copy it there), the build deleted, then
#             the installed smddp-run runs examples/torch/ddp.py on the GPU
#             with the installed package. Needs nvcc and a
#             tree with a configure script, since the GPU machine has no
#             autoreconf: PIPSRC, else a make dist tarball unpacked in
#             CARRY/dist, else this tree with what autoreconf -fi made here
#             carried (configure Makefile.in aclocal.m4 config.h.in build-aux m4).
# (default: build hf fsdp pipeline ddp). Environment: B, CARRY, OUT (logs,
# default ./gpu-logs; summary.txt there), PYTHON (default python3).
# Exit: 0 every stage passed, 1 one failed. Estimated 4 to 6 minutes on an
# H100 with 16 cores (the build 1-2 of them); pip-cuda 3-5 more.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
abs() { case $1 in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
B=$(abs "${B:-build-cuda}")
CARRY=$(abs "${CARRY:-.devcarry}")
OUT=$(abs "${OUT:-gpu-logs}")
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib/.libs:$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SMDDP_CONFIG=/dev/null SMDDP_TIMEOUT=120 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
RUN=$B/cmd/smddp-run
E=$ROOT/examples/torch
stages=${*:-build hf fsdp pipeline ddp}
rc=0
summary=$OUT/summary.txt
: >>"$summary"
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/smddp-ex.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT
cd "$TMPD" || exit 1 # the ranks' working folder: nothing lands in the tree

say() { echo "$*" | tee -a "$summary"; }
# stage NAME SECONDS COMMAND...: runs it with a deadline; output in $TMPD/NAME.log,
# appended to $OUT/torch-examples.log
stage() {
	local name=$1 secs=$2 t0 st
	shift 2
	t0=$(date +%s.%N)
	timeout -k 10 "$secs" "$@" >"$TMPD/$name.log" 2>&1
	st=$?
	{ echo "===== $name: $*: exit $st"; cat "$TMPD/$name.log"; } >>"$OUT/torch-examples.log"
	say "$(printf '%-22s exit %3d  %6.1f s' "$name" "$st" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')")"
	[ "$st" -eq 0 ] || rc=1
	return "$st"
}
# job NAME SECONDS ARGS...: smddp-run -n 2 ARGS under a deadline
job() {
	local name=$1 secs=$2
	shift 2
	stage "$name" "$secs" "$RUN" -n 2 --timeout $((secs - 10)) "$@"
}
# compare WHAT COMMAND...: a comparison that prints one line
compare() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		say "  ok: $what: $out"
	else
		say "  FAIL: $what: $out"
		rc=1
	fi
}
# sums NAME: the parameter checksums the job printed, one per line
sums() { grep -ho "parameter checksum .*" "$TMPD/$1.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';'; }
params() { compare "$1" "$PY" "$ROOT/tests/examples/params_compare.py" --rtol "$2" "$3" "$4"; }

for s in $stages; do
	case $s in
	build)
		say "$("$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())' 2>&1)"
		cp -r "$ROOT/python" "$TMPD/pysrc"
		stage build 500 env SMDDP_BUILD_DIR="$B" SMDDP_SOURCE_DIR="$ROOT" SMDDP_TORCH_CUDA=1 \
			MAX_JOBS=16 "$PY" -m pip install -q --no-build-isolation --no-deps --no-index \
			--target "$TMPD/site" "$TMPD/pysrc" || break
		export PYTHONPATH=$TMPD/site:$ROOT/python/tests
		;;
	hf)
		say "$("$PY" -c 'import transformers, accelerate; print("transformers", transformers.__version__, "accelerate", accelerate.__version__)' 2>&1)"
		export HF_HUB_OFFLINE=1 HF_HOME=$TMPD/hf TRANSFORMERS_NO_ADVISORY_WARNINGS=1
		for client in trainer accelerate; do
			for b in smddp gloo; do
				job "hf-$client-$b" 150 env DEVICE=cuda "$PY" "$ROOT/python/tests/test_hf.py" \
					"$client" "$b" "$TMPD/$client-$b"
				grep -h "TORCH-\|FAILED\|Error" "$TMPD/hf-$client-$b.log" | head -4 | tee -a "$summary"
			done
			compare "$client on the GPU, smddp against gloo" "$PY" "$ROOT/python/tests/hf_compare.py" \
				"$TMPD/$client-smddp" "$TMPD/$client-gloo" 2
		done
		;;
	fsdp)
		job fsdp-smddp 120 "$PY" "$E/fsdp.py" --save "$TMPD/fsdp-smddp.pt"
		job fsdp-gloo-cpu 120 "$PY" "$E/fsdp.py" --cpu --backend gloo --save "$TMPD/fsdp-gloo.pt"
		say "  fsdp smddp (GPU): $(sums fsdp-smddp) gloo (CPU): $(sums fsdp-gloo-cpu)"
		params "fsdp.py, smddp on the GPU against gloo on the CPU" 1e-4 \
			"$TMPD/fsdp-smddp.pt" "$TMPD/fsdp-gloo.pt"
		;;
	pipeline)
		job pipe-smddp 120 "$PY" "$E/pipeline.py" --save "$TMPD/pipe-smddp"
		job pipe-gloo-cpu 120 "$PY" "$E/pipeline.py" --cpu --backend gloo --save "$TMPD/pipe-gloo"
		for r in 0 1; do
			params "pipeline.py stage $r, smddp on the GPU against gloo on the CPU" 1e-4 \
				"$TMPD/pipe-smddp.$r.pt" "$TMPD/pipe-gloo.$r.pt"
		done
		;;
	ddp)
		job ddp-smddp 120 "$PY" "$E/ddp.py"
		job ddp-gloo 120 "$PY" "$E/ddp.py" --backend gloo
		a=$(sums ddp-smddp) b=$(sums ddp-gloo)
		if [ -n "$a" ] && [ "$a" = "$b" ] && [ "${a//;/}" = "${a%;}" ]; then
			say "  ok: ddp.py on the GPU: smddp and gloo agree: $a"
		else
			say "  FAIL: ddp.py on the GPU: smddp '$a', gloo '$b'"
			rc=1
		fi
		;;
	pip-cuda)
		src=${PIPSRC:-}
		if [ -z "$src" ]; then
			src=$ROOT
			for d in "$CARRY"/dist/libsmddp-*/; do [ -x "$d/configure" ] && src=${d%/}; done
		fi
		rm -rf "$TMPD/pipsrc" "$TMPD/pipsite"
		mkdir -p "$TMPD/pipsrc"
		# a copy as a user has it: no build, no carried libraries, no git
		tar -C "$src" --exclude=./.git --exclude="./${B#"$src"/}" --exclude="./${CARRY#"$src"/}" \
			--exclude=./python/build -cf - . | tar -C "$TMPD/pipsrc" -xf -
		[ -x "$TMPD/pipsrc/configure" ] ||
			say "pip-cuda: $src has no configure script: pip will run autoreconf (absent on the GPU machine)"
		say "pip-cuda: from $src ($(command -v nvcc || echo 'no nvcc on PATH'))"
		# cJSON to build against: the carried library under the name the
		# linker looks for, its header carried or the system's
		mkdir -p "$TMPD/cjson/include/cjson"
		ln -sf "$CARRY/libcjson.so.1" "$TMPD/cjson/libcjson.so"
		for h in "$CARRY/include/cjson/cJSON.h" /usr/include/cjson/cJSON.h; do
			[ -f "$h" ] && cp "$h" "$TMPD/cjson/include/cjson/" && break
		done
		stage pip-cuda-install 500 env -u SMDDP_BUILD_DIR SMDDP_BUNDLE=1 SMDDP_TORCH_CUDA=1 \
			MAX_JOBS=16 PKG_CONFIG_PATH= SMDDP_CONFIGURE_ARGS="--without-libfabric CPPFLAGS=-I$TMPD/cjson/include LDFLAGS=-L$TMPD/cjson" \
			"$PY" -m pip install -v --no-build-isolation --no-deps --no-index \
			--target "$TMPD/pipsite" "$TMPD/pipsrc/python" || continue
		grep -h "^smddp: \|CUDA\|cuda" "$TMPD/pip-cuda-install.log" | grep -v "^ *-" | head -8 | tee -a "$summary"
		rm -rf "$TMPD/pipsrc"
		site=$TMPD/pipsite
		compare "the bundled backend has the CUDA path" env LD_LIBRARY_PATH="$CARRY" PYTHONPATH="$site" \
			"$PY" -c 'import smddp.torch as s; assert s.cuda_built(), "no CUDA path"; print(s.library_version(), s.__file__)'
		stage pip-cuda-ddp 120 env LD_LIBRARY_PATH="$CARRY" PYTHONPATH="$site" "$TMPD/pipsite/bin/smddp-run" \
			-n 2 --timeout 100 "$PY" "$E/ddp.py"
		a=$(sums pip-cuda-ddp)
		b=$a vs=
		[ -f "$TMPD/ddp-gloo.log" ] && b=$(sums ddp-gloo) vs=", and with gloo" # the ddp stage's
		if [[ $a == " 2 parameter checksum "* ]] && [ "${a//;/}" = "${a%;}" ] && [ "$a" = "$b" ]; then
			say "  ok: ddp.py with the pip-installed package: 2 ranks agree$vs: $a"
		else
			say "  FAIL: ddp.py with the pip-installed package: '$a', gloo '$b'"
			rc=1
		fi
		;;
	*)
		echo "torch-examples-device.sh: unknown stage '$s' (build hf fsdp pipeline ddp pip-cuda)" >&2
		rc=1
		;;
	esac
done
say "torch-examples-device.sh: $([ "$rc" = 0 ] && echo "every stage passed" || echo "a stage failed")"
exit $rc
