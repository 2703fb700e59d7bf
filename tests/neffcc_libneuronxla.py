"""Calls neuronx-cc the way libneuronxla does (neuron_cc_wrapper): a fresh
work directory per graph, the HLO module written there, then subprocess.run
of `neuronx-cc compile ...` found through PATH, success judged by the exit
code and the NEFF at --output. 8 concurrent calls over 2 graphs; prints
"OK 8 calls" when every one got its NEFF."""
import concurrent.futures
import os
import subprocess
import sys
import uuid


def compile_graph(root, graph):
    workdir = os.path.join(root, str(uuid.uuid4()))
    os.makedirs(workdir)
    name = "model.MODULE_%s+4fd1c" % graph
    hlo = os.path.join(workdir, name + ".hlo_module.pb")
    neff = os.path.join(workdir, name + ".neff")
    with open(hlo, "wb") as f:
        f.write(b"HloModule python_" + graph.encode())
    cmd = ["neuronx-cc", "compile", "--target=trn1", "--framework=XLA", hlo,
           "--output", neff, "--verbose=35"]
    proc = subprocess.run(cmd, cwd=workdir, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise RuntimeError("compile failed (%d): %s" %
                           (proc.returncode, proc.stderr.decode()))
    lines = proc.stdout.decode().splitlines()
    assert lines and lines[-1] == "Compiler status PASS", lines
    assert os.path.isfile(neff) and not os.path.islink(neff), neff
    with open(neff, "rb") as f:
        return graph, f.read()


def main():
    root = sys.argv[1]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: compile_graph(root, "py%d" % (i % 2)),
                                range(8)))
    by_graph = {}
    for graph, neff in results:
        by_graph.setdefault(graph, set()).add(neff)
    assert len(by_graph) == 2 and all(len(v) == 1 for v in by_graph.values())
    print("OK %d calls" % len(results))


if __name__ == "__main__":
    main()
