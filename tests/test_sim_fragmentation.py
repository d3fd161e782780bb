"""The FGD fragmentation measure and FGD's choices, on small nodes computed by hand."""

from __future__ import annotations

import numpy as np

from accelsched.sim import policies
from accelsched.sim.fragmentation import from_shapes, node_fragmentation, typical_pods

MODELS = ["T4", "V100M32"]
ANY = frozenset()


def typical():
    # (cpu milli, GPUs, milli per GPU, models), weights 2:1:1:1
    return from_shapes(
        [(4000, 1, 500, ANY), (16000, 1, 1000, ANY), (2000, 0, 0, ANY), (0, 1, 200, frozenset({"V100M32"}))],
        [2, 1, 1, 1],
        MODELS,
    )


def test_fragmentation_of_hand_computed_nodes():
    gpu_free = np.array([[1000, 300, 0, 0, 0, 0, 0, 0], [1000] * 8])
    frag = node_fragmentation(gpu_free, np.array([8000, 96000]), np.array([0, 1]), typical())
    # Node 0 (T4, 8 cores free, GPUs 1000 + 300 free):
    #   500-milli shape runs: only the 300 left on the second GPU is fragment for it       -> 2 x 300
    #   16-core whole-GPU shape lacks CPU: all 1300 free milli are fragment                  -> 1 x 1300
    #   CPU-only shape can use no GPU: all 1300                                              -> 1 x 1300
    #   V100M32-only shape cannot use a T4: all 1300                                         -> 1 x 1300
    # Node 1 (V100M32, 96 cores, 8 free GPUs): only the CPU-only shape leaves all 8000 unused.
    assert frag.tolist() == [(2 * 300 + 3 * 1300) / 5, 8000 / 5]


def test_multi_gpu_shape_needs_enough_gpus_with_its_share():
    ty = from_shapes([(0, 2, 1000, ANY), (0, 1, 600, ANY)], [1, 1], MODELS)
    frag = node_fragmentation(np.array([[1000, 600, 0, 0, 0, 0, 0, 0]]), np.array([1000]), np.array([0]), ty)
    # Two whole GPUs: one fully free GPU only -> all 1600 free is fragment; a 600 share fits on both -> 0.
    assert frag.tolist() == [1600 / 2]


def test_typical_pods_are_the_popular_shapes_covering_95_percent():
    shapes = [(1000, 1, 500, ANY)] * 60 + [(0, 0, 0, ANY)] * 36 + [(8000, 8, 1000, ANY)] * 3 + [(1, 1, 1, ANY)]
    ty = typical_pods(shapes, MODELS)
    assert ty.size == 2 and ty.weight.tolist() == [60, 36]  # 96% covered by two shapes; the rare ones are left out
    assert ty.freq.tolist() == [60 / 96, 36 / 96]


def test_fgd_keeps_whole_gpus_for_the_whole_gpu_pods():
    ty = from_shapes([(0, 1, 1000, ANY)], [1], MODELS)
    view = policies.NodeView(
        cpu_free=np.array([64000, 64000]),
        cpu_cap=np.array([64000, 64000]),
        gpu_free=np.array([[500, 1000, 0, 0, 0, 0, 0, 0], [1000, 1000, 0, 0, 0, 0, 0, 0]]),
        gpus=np.array([2, 2]),
        model=np.array([0, 0]),
    )
    from accelsched.sim.fragmentation import fragmentation, gpu_terms

    view.fits, view.usable = gpu_terms(view.gpu_free, ty)
    view.frag = fragmentation(view.free, view.cpu_free, view.model, view.fits, view.usable, ty)
    fgd = policies.FGD(ty)
    pod = policies.PodShape(cpu=0, memory=0, num_gpu=1, milli=500)
    # Node 0: the 500 on its half-used GPU is fragment now; filling it removes 500 of fragment:
    # sigmoid(0.5) x 100 = 62. Node 1: a share on a whole GPU turns 2 usable GPUs into 1 + 500 fragment:
    # sigmoid(-0.5) x 100 = 37.
    assert fgd.scores(view, pod).tolist() == [62, 37]
    one = policies.NodeView(
        view.cpu_free[:1],
        view.cpu_cap[:1],
        view.gpu_free[:1],
        view.gpus[:1],
        view.model[:1],
        view.fits[:1],
        view.usable[:1],
        view.frag[:1],
    )
    assert fgd.choose_gpu(one, pod) == 0  # the half-used GPU, not the whole one


def test_packing_and_bestfit_prefer_the_fuller_node():
    view = policies.NodeView(
        cpu_free=np.array([8000, 64000]),
        cpu_cap=np.array([64000, 64000]),
        gpu_free=np.array([[400, 0, 0, 0, 0, 0, 0, 0], [1000, 1000, 0, 0, 0, 0, 0, 0]]),
        gpus=np.array([2, 2]),
        model=np.array([0, 0]),
    )
    pod = policies.PodShape(cpu=4000, memory=0, num_gpu=1, milli=300)
    packing = policies.GpuPacking().scores(view, pod).tolist()
    # A shared GPU with 400 free: 100 - (400 x 100 / 1000) / 10 = 96; an idle 2-GPU node: max(33 - 2, 2) = 31.
    assert packing == [96, 31]
    bestfit = policies.BestFit().scores(view, pod).tolist()
    assert bestfit[0] > bestfit[1]
