"""``hydra/sweeper=longest_first``: Hydra's basic sweeper, its jobs launched longest first, small-N last.

    python -m harness -m experiment=table1 hydra/sweeper=longest_first hydra/launcher=gpu_joblib hydra.launcher.n_jobs=8

The jobs are the basic sweeper's (the product of ``hydra.sweeper.params`` and the command line,
so every experiment file works unchanged); only their order and batches differ. A launcher starts
the jobs of a batch in the order given (joblib hands them to free workers one by one) and the
sweeper launches its batches in turn, each after the previous one ended. So the sweeper returns
the batches of :func:`harness.plan.launch_phases`: one batch of every cell outside the small-N
regime, longest estimate first (its recorded ``wall_s`` on any device, else its arm's median, else
its timeout), then every small-N cell in a batch of its own, so each runs with the other GPUs idle.

Hydra finds the plugin in the ``hydra_plugins`` namespace package (this folder, on ``sys.path`` when
the harness runs from the repository root) and its config in the ConfigStore, as Hydra documents for
plugins; a plugin's class must live under ``hydra_plugins``.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.types import Override


@dataclass
class LongestFirstSweeperConf:
    _target_: str = "hydra_plugins.longest_first_sweeper.longest_first_sweeper.LongestFirstSweeper"
    max_batch_size: Optional[int] = None  # splits the parallel phase into batches of at most this many jobs
    params: Optional[Dict[str, str]] = None  # as the basic sweeper's: the experiment files set them


ConfigStore.instance().store(group="hydra/sweeper", name="longest_first", node=LongestFirstSweeperConf,
                             provider="turbo-gmm")


class LongestFirstSweeper(BasicSweeper):
    """The basic sweeper's jobs in the batches of :func:`harness.plan.launch_phases`."""

    def split_arguments(self, overrides: List[Override], max_batch_size: Optional[int]) -> List[List[List[str]]]:
        """The batches :meth:`BasicSweeper.sweep` launches in turn: the parallel phase (chunked by
        ``max_batch_size``), then one batch per small-N cell."""
        from harness.plan import WallTimes, launch_phases, plan_cells  # the harness loads only when a sweep runs

        (jobs,) = BasicSweeper.split_arguments(overrides, None)
        loader = self.hydra_context.config_loader
        cells = plan_cells(((job, loader.load_sweep_config(self.config, job)) for job in jobs), WallTimes())
        parallel, alone = launch_phases(cells)
        batches = list(self.split_overrides_to_chunks([list(c.job) for c in parallel], max_batch_size)) if parallel else []
        batches += [[list(c.job)] for c in alone]
        print(f"[harness] longest_first: {len(parallel)} cells launched longest first "
              f"(~{sum(c.seconds for c in parallel) / 60:.0f} min of cells), then {len(alone)} small-N cells "
              f"one at a time (~{sum(c.seconds for c in alone) / 60:.0f} min)", flush=True)
        return batches
