"""benchlib.py - what the torch benchmarks of this folder share (imported by them, not run)."""
import torch
import torch.nn as nn


def mlp(width, dev):
    """The DDP benchmarks' model: two blocks of Linear(width, width) and ReLU,
    then Linear(width, width), on dev; the same weights on every rank and at
    every call (seeded 0), so that models built alike train alike."""
    torch.manual_seed(0)
    layers = []
    for _ in range(2):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, width)).to(dev)
