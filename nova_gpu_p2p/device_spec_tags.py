# Copyright 2026 The nova-gpu-p2p Authors
#
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""How a GPU's ``[pci] device_spec`` entry carries its host clique.

Each GPU in a clique gets, in its own device_spec entry:

* the trait ``CUSTOM_GPU_P2P_CLIQUE_ID_<n>``, which Nova puts on the GPU's
  placement provider when ``[pci] report_in_placement`` is on (Nova
  rewrites a device provider's traits from the device_spec on every
  update, so the device_spec is the only place it can be written); and
* the tag ``gpu_p2p_clique: "<n>"``, which Nova keeps in the host's PCI
  pools, beside each pool's provider UUID. The scheduler filter reads it
  there: placement traits never reach a scheduler filter, pools do, and
  pools are the compute host's own report.

``nova-gpu-p2p topology --device-spec`` prints the entries; the driver
and ``nova-gpu-p2p check`` report GPUs whose entry or provider disagrees
with the topology. An entry's traits are read as Nova reads them
(:func:`entry_traits`: Nova's ``get_traits``, os-traits' normalisation),
so an operator's ``gpu_p2p_clique_id_3`` counts as the trait Nova puts on
the provider, ``CUSTOM_GPU_P2P_CLIQUE_ID_3``.

On a host with NVIDIA Fabric Manager (an HGX board) a GPU's entry also
names each partition of two or more GPUs holding it: the trait
``CUSTOM_GPU_P2P_PARTITION_<id>`` per partition, and the tag
``gpu_p2p_partitions: "<id>:<GPUs>,..."``, each partition ID with its GPU
count. The count is there because Nova's pools hold only free GPUs: the
scheduler could not tell a whole partition from the free part of one
(:mod:`nova_gpu_p2p.scheduler.partition_fit`). Hosts without partitions
get no such trait or tag.

Each GPU's entry also carries its place in the claim order
(:func:`nova_gpu_p2p.claim_order.ranks`) as that many order tags
``gpu_p2p_order_1``, ``gpu_p2p_order_2``, ... (:func:`order_tags`): Nova
sorts a host's PCI pools by their number of keys, so the GPU whose entry
has the fewest comes first, and a move claim that ignores placement (an
unfixed Nova, :mod:`nova_gpu_p2p.nova_fix`) takes a partition (clique)
first on an empty NUMA node, after any number of nova-compute restarts.
Only Nova's pool order reads them; a missing or stale one costs moves,
never a wrong clique (the scheduler predicts Nova's claim from the pools
it sees, :mod:`nova_gpu_p2p.scheduler.move_claims`).
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Set
import functools
import importlib
import json
import types
import warnings

from nova_gpu_p2p_guest import errors

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p import claim_order
from nova_gpu_p2p.fabric import partitions as partitions_mod
from nova_gpu_p2p.topology import host_cliques as host_cliques
from nova_gpu_p2p.topology import model
from nova_gpu_p2p import traits

#: The device_spec tag (and so PCI pool key) holding a GPU's clique ID.
CLIQUE_TAG = 'gpu_p2p_clique'
#: The device_spec tag (and so PCI pool key) holding the Fabric Manager
#: partitions of two or more GPUs that hold a GPU, with their GPU counts.
PARTITIONS_TAG = 'gpu_p2p_partitions'
#: The start of each order tag's name; the tags are numbered from 1.
ORDER_TAG_PREFIX = 'gpu_p2p_order_'
_NONE: Mapping[int, int] = types.MappingProxyType({})


def order_tags(rank: int) -> dict[str, str]:
    """The order tags of the GPU at place ``rank`` (from 0) of its host.

    ``rank`` tags, each holding the rank: their number is what Nova sorts
    by, their value is for a reader.
    """
    return {'%s%d' % (ORDER_TAG_PREFIX, n): str(rank)
            for n in range(1, rank + 1)}


def is_order_tag(key: str) -> bool:
    """Whether a device_spec tag (pool key) is one of :func:`order_tags`."""
    return key.startswith(ORDER_TAG_PREFIX)


def partition_sizes(partitions: Iterable[partitions_mod.FabricPartition]
                    ) -> dict[str, dict[int, int]]:
    """GPU address -> ID and GPU count of each partition of 2+ holding it.

    Partitions of one GPU are left out: every GPU has its own, so they
    say nothing a scheduler needs.
    """
    sizes: dict[str, dict[int, int]] = {}
    for partition in partitions:
        if len(partition.gpus) < 2:
            continue
        for address in partition.gpus:
            sizes.setdefault(address, {})[partition.id] = len(
                partition.gpus)
    return sizes


def _partitions_value(partitions: Mapping[int, int]) -> str:
    return ','.join('%d:%d' % (partition_id, partitions[partition_id])
                    for partition_id in sorted(partitions))


def entry(address: str, clique_id: int,
          partitions: Mapping[int, int] = _NONE, rank: int = 0) -> str:
    """The ``[pci] device_spec`` line for a GPU of clique ``clique_id``.

    :param partitions: ID -> GPU count of the Fabric Manager partitions
        of two or more GPUs holding it (:func:`partition_sizes`).
    :param rank: its place in the host's claim order (:func:`entries`).
    """
    spec = {'address': address, 'traits': ','.join(
        [traits.clique_id_trait(clique_id)]
        + [traits.partition_trait(p) for p in sorted(partitions)]),
        CLIQUE_TAG: str(clique_id)}
    if partitions:
        spec[PARTITIONS_TAG] = _partitions_value(partitions)
    spec.update(order_tags(rank))
    return 'device_spec = %s' % json.dumps(spec)


def entries(clique_ids: Mapping[str, int | None],
            numa_nodes: Mapping[str, int | None],
            partitions: Iterable[partitions_mod.FabricPartition] = ()
            ) -> list[str]:
    """A host's device_spec lines: each GPU in a clique, in address order.

    :param clique_ids: GPU address -> host clique ID (None: no clique,
        no line).
    :param numa_nodes: GPU address -> host NUMA node.
    :param partitions: the host's Fabric Manager partitions, if any: they,
        not the cliques, are the groups of the claim order then.
    """
    partitions = tuple(partitions)
    held = partition_sizes(partitions)
    ranks = claim_ranks(clique_ids, numa_nodes, partitions)
    return [entry(address, clique_id, held.get(address, _NONE),
                  ranks[address.lower()])
            for address, clique_id in sorted(clique_ids.items())
            if clique_id is not None]


def claim_ranks(clique_ids: Mapping[str, int | None],
                numa_nodes: Mapping[str, int | None],
                partitions: Iterable[partitions_mod.FabricPartition] = ()
                ) -> dict[str, int]:
    """Each GPU in a clique's place in the claim order (:func:`entries`)."""
    members: dict[int, list[str]] = {}
    for address, clique_id in clique_ids.items():
        if clique_id is not None:
            members.setdefault(clique_id, []).append(address)
    groups = ([p.gpus for p in partitions if len(p.gpus) > 1]
              or list(members.values()))
    return claim_order.ranks(
        {address: numa_nodes.get(address)
         for gpus in members.values() for address in gpus}, groups)


def misordered(spec_tags: Mapping[str, Mapping[str, str]],
               ranks: Mapping[str, int]) -> list[str]:
    """GPUs whose entry has not as many order tags as their rank.

    Only GPUs an entry offers: the others are not Nova's to claim.
    """
    return sorted(address for address, rank in ranks.items()
                  if address in spec_tags
                  and sum(map(is_order_tag, spec_tags[address])) != rank)


def provider_name(nodename: str, address: str) -> str:
    """Nova's name for a PCI device's placement provider.

    ``<nodename>_<ADDRESS>`` (``PlacementView._get_rp_name_for_address``
    in ``nova.compute.pci_placement_translator``, a private method, so
    :func:`nova_gpu_p2p.nova_signatures.check` compares the two at start-up).
    """
    return '%s_%s' % (nodename, address.upper())


def tag_clique(tags: Mapping[str, str | None]) -> int | None:
    """The clique ID a device_spec tag set (or PCI pool) carries.

    None where the tag is absent or not a clique ID: such a GPU is in no
    clique as far as scheduling goes (unknowns fail closed).
    """
    value = tags.get(CLIQUE_TAG)
    clique_id = ascii_decimal.parse(value if value is None else str(value))
    return clique_id if clique_id in host_cliques.CLIQUE_IDS else None


def tag_partitions(tags: Mapping[str, str | None]) -> dict[int, int] | None:
    """Partition ID -> GPU count, as a tag set (or PCI pool) carries them.

    None where the tag is absent: the host has no Fabric Manager
    partitions as far as scheduling goes. A value that is not a list of
    ``<id>:<GPUs>`` (two or more GPUs each) reads as no partition at all:
    such a GPU serves only 1-GPU requests (unknowns fail closed).
    """
    value = tags.get(PARTITIONS_TAG)
    if value is None:
        return None
    partitions = {}
    for item in str(value).split(','):
        text_id, _, text_size = item.partition(':')
        partition_id = ascii_decimal.parse(text_id)
        size = ascii_decimal.parse(text_size)
        if partition_id is None or size is None or size < 2:
            return {}
        partitions[partition_id] = size
    return partitions


def _provider_wrong(present: Set[str], clique_id: int | None,
                    partitions: Mapping[int, int]) -> str | None:
    """What a GPU provider's clique and partition traits get wrong."""
    wanted = {traits.partition_trait(p) for p in partitions}
    if clique_id is not None:
        wanted.add(traits.clique_id_trait(clique_id))
    ours = {t for t in present if t.startswith(
        (traits.CLIQUE_ID_PREFIX, traits.PARTITION_PREFIX))}
    if ours == wanted:
        return None
    return 'its placement provider has %s' % (
        ', '.join(sorted(ours)) or 'no clique trait')


def _tag(tags: Mapping[str, str], key: str) -> str:
    value = tags.get(key)
    if value is None:
        return 'no %s tag' % key
    return '%s %s' % (key, errors.quoted(value))


def _entry_wrong(tags: Mapping[str, str], clique_id: int | None,
                 partitions: Mapping[int, int]) -> str | None:
    """What a GPU's device_spec tags get wrong."""
    wrong = []
    if (tag_clique(tags) != clique_id
            or (tags.get(CLIQUE_TAG) is not None and clique_id is None)):
        wrong.append(_tag(tags, CLIQUE_TAG))
    if tag_partitions(tags) != (dict(partitions) or None):
        wrong.append(_tag(tags, PARTITIONS_TAG))
    if not wrong:
        return None
    return 'its [pci] device_spec entry has %s' % ', '.join(wrong)


def problems(clique_ids: Mapping[str, int | None],
             provider_traits: Mapping[str, Set[str]],
             spec_tags: Mapping[str, Mapping[str, str]],
             partitions: Mapping[str, Mapping[int, int]] = _NONE,
             ranks: Mapping[str, int] = _NONE) -> list[str]:
    """What :func:`problems_by_gpu` finds, in GPU address order."""
    return list(problems_by_gpu(clique_ids, provider_traits, spec_tags,
                                partitions, ranks).values())


def topology_ranks(topology: model.HostTopology,
                   clique_ids: Mapping[str, int | None]) -> dict[str, int]:
    """:func:`claim_ranks` of a host as discovery read it."""
    return claim_ranks(clique_ids, {address: function.numa_node for
                                    address, function
                                    in topology.functions.items()},
                       topology.fabric_partitions)


def topology_problems(topology: model.HostTopology,
                      clique_ids: Mapping[str, int | None],
                      provider_traits: Mapping[str, Set[str]],
                      spec_tags: Mapping[str, Mapping[str, str]]
                      ) -> list[str]:
    """:func:`problems` of a host: its partitions, the lines it prints."""
    return problems(clique_ids, provider_traits, spec_tags,
                    partition_sizes(topology.fabric_partitions),
                    topology_ranks(topology, clique_ids))


def problems_by_gpu(clique_ids: Mapping[str, int | None],
                    provider_traits: Mapping[str, Set[str]],
                    spec_tags: Mapping[str, Mapping[str, str]],
                    partitions: Mapping[str, Mapping[int, int]] = _NONE,
                    ranks: Mapping[str, int] = _NONE) -> dict[str, str]:
    """GPUs whose provider traits or device_spec tags miss their groups.

    By GPU address, so that ``check`` titles a row per GPU without reading
    the address back out of the text.

    :param clique_ids: GPU address -> host clique ID (None: no clique).
    :param provider_traits: GPU address -> traits of its placement
        provider, for the GPUs that have one.
    :param spec_tags: GPU address -> tags of the device_spec entry that
        matches it, for the GPUs that one matches.
    :param partitions: GPU address -> its Fabric Manager partitions
        (:func:`partition_sizes`); none on a host without them.
    :param ranks: GPU address (lower case) -> its place in the claim
        order (:func:`claim_ranks`), for the line to set.
    """
    found = {}
    for address, clique_id in sorted(clique_ids.items()):
        held = partitions.get(address, _NONE)
        wrong = [why for why in (
            _provider_wrong(provider_traits[address], clique_id, held)
            if address in provider_traits else None,
            _entry_wrong(spec_tags[address], clique_id, held)
            if address in spec_tags else None) if why]
        if not wrong:
            continue
        if clique_id is None:
            found[address] = (
                'GPU %s is in no clique but %s: remove the clique trait and '
                'tag from its [pci] device_spec entry'
                % (address, ' and '.join(wrong)))
        else:
            found[address] = ('GPU %s is in clique %d but %s: set %s'
                              % (address, clique_id, ' and '.join(wrong),
                                 entry(address, clique_id, held,
                                       ranks.get(address.lower(), 0))))
    return found


def _nova(module: str) -> types.ModuleType:
    """A Nova module, imported on first use and without its warnings.

    Commands that never read a device_spec skip Nova's imports; the chain
    of these loads eventlet, whose deprecation warning means nothing to an
    operator running ``nova-gpu-p2p check`` (nova-compute has imported it
    long before).
    """
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return importlib.import_module(module)


def entry_traits(tags: Mapping[str, str]) -> set[str]:
    """The traits Nova gives a GPU's provider from its device_spec tags."""
    translator = _nova('nova.compute.pci_placement_translator')
    return set(translator.get_traits(tags.get('traits', '')))


@functools.lru_cache(maxsize=1)
def _whitelist(device_specs: tuple[str, ...]):
    """Nova's own matching (wildcards, regexes, the first entry wins).

    Parsed once per device_spec value, not on every periodic update of
    nova-compute: parsing asks sysfs about each address-based entry.
    """
    return _nova('nova.pci.whitelist').Whitelist(list(device_specs))


def configured_tags(device_specs: Iterable[str],
                    gpus: Iterable[tuple[str, int, int]]
                    ) -> dict[str, dict[str, str]]:
    """Tags of the device_spec entry Nova matches to each GPU.

    :param device_specs: ``[pci] device_spec`` values, as in nova.conf.
    :param gpus: (address, vendor ID, device ID) of each GPU.
    :returns: address -> tags, for the GPUs an entry matches.
    """
    specs = _whitelist(tuple(device_specs))
    tags = {}
    for address, vendor, device in gpus:
        dev = {'vendor_id': '%04x' % vendor, 'product_id': '%04x' % device,
               'address': address, 'parent_addr': None,
               'capabilities': {'vpd': {'card_serial_number': None}}}
        for spec in specs.specs:
            if spec.match(dev):
                tags[address] = dict(spec.get_tags())
                break
    return tags
