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

"""A bare placement holding GPU hosts, and ``openstack`` run against it.

Placement's own WSGI application over SQLite (its ``PlacementFixture``,
reached through wsgi-intercept), filled as Nova fills it with PCI devices
in placement: a compute node provider per host, a child per GPU named
``<host>_<ADDRESS>`` with one unit of ``CUSTOM_PCI_10DE_<product>`` and
its ``CUSTOM_GPU_P2P_CLIQUE_ID_<n>`` / ``CUSTOM_GPU_P2P_PARTITION_<id>``
traits. It runs ``auth_strategy = noauth2`` with a policy that lets any
caller read (:data:`READ_RULES`), as the operator guide tells for a
placement without Keystone, and the command reaches it through a
clouds.yaml cloud with ``auth_type: none``. For the tests and the
benchmark (``lab/bench.py``'s capacity section).
"""

from collections.abc import Mapping
from collections.abc import Sequence
from collections.abc import Set
import contextlib
import dataclasses
import io
import os
import random
import sys
import tempfile
import uuid

import fixtures
from oslo_config import cfg
from placement import db_api as placement_db
from placement.tests.functional.fixtures import placement as placement_fixture
from placement.tests.unit import policy_fixture
import requests
from requests import adapters
import sqlalchemy

GPU_CLASS = 'CUSTOM_PCI_10DE_2330'
#: What ``openstack gpu p2p capacity`` reads.
READ_RULES = ('placement:resource_providers:list',
              'placement:resource_classes:list', 'placement:traits:list',
              'placement:resource_providers:allocations:list',
              'placement:allocations:list')
#: An H100 board's partitions of two or more GPUs, by GPU index.
HGX_PARTITIONS = {1: (0, 2), 2: (1, 3), 3: (4, 6), 4: (5, 7),
                  5: (0, 1, 2, 3), 6: (4, 5, 6, 7), 7: tuple(range(8))}
NAMESPACE = uuid.UUID('7b1b8c4e-44c4-4a4a-9c44-000000000044')
HOST_INVENTORY = {'PCPU': 64, 'MEMORY_MB': 1048576, 'DISK_GB': 4096}


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    address: str
    clique: int | None = None
    partitions: tuple[int, ...] = ()
    reserved: bool = False
    resource_class: str = GPU_CLASS


@dataclasses.dataclass(frozen=True)
class HostSpec:
    name: str
    gpus: tuple[GpuSpec, ...]
    disabled: bool = False


def pcie_host(name: str, cliques: Sequence[int | None],
              **kwargs) -> HostSpec:
    """A host of GPUs with these clique IDs (None: in no clique)."""
    return HostSpec(name, tuple(
        GpuSpec('0000:%02x:00.0' % (0x10 + i), clique)
        for i, clique in enumerate(cliques)), **kwargs)


def hgx_host(name: str, **kwargs) -> HostSpec:
    """An HGX H100 board: one clique, the board's partitions."""
    return HostSpec(name, tuple(
        GpuSpec('0000:%02x:00.0' % (0x10 + i), 0, tuple(
            p for p, members in sorted(HGX_PARTITIONS.items())
            if i in members)) for i in range(8)), **kwargs)


def provider_uuid(name: str) -> str:
    return str(uuid.uuid5(NAMESPACE, name))


def gpu_uuid(host: str, gpu: GpuSpec) -> str:
    """The GPU's provider, named as Nova names it."""
    return provider_uuid('%s_%s' % (host, gpu.address.upper()))


def servers_for(hosts: Sequence[HostSpec], seed: int, busy: float = 0.5,
                taken: Set[str] = frozenset()
                ) -> dict[str, tuple[str, list[GpuSpec]]]:
    """Servers of 1, 2 and 4 GPUs on about ``busy`` of every host.

    Each on GPUs of one clique (as ``required`` servers land), GPUs in
    ``taken`` (provider UUIDs) left alone, so the cloud is fragmented as
    a used one is.
    """
    rng = random.Random(seed)
    servers = {}
    for host in hosts:
        free = [g for g in host.gpus if not g.reserved
                and gpu_uuid(host.name, g) not in taken]
        while free and rng.random() < busy:
            size = min(rng.choice((1, 2, 4)), len(free))
            first = free[0]
            chosen = [g for g in free if g.clique == first.clique
                      and first.clique is not None][:size] or [first]
            free = [g for g in free if g not in chosen]
            servers[str(uuid.UUID(int=rng.getrandbits(128)))] = (
                host.name, chosen)
    return servers


class BarePlacement:
    """Placement's WSGI app over SQLite, as a context manager."""

    def __init__(self) -> None:
        self._fixture = placement_fixture.PlacementFixture()
        self.session = requests.Session()
        self.session.headers.update({
            'x-auth-token': 'admin',
            'OpenStack-API-Version': 'placement 1.39'})
        self._known: set[tuple[str, str]] = set()
        #: GPU providers held by a server.
        self._taken: set[str] = set()
        # keystoneauth's keep-alive socket options bypass wsgi-intercept
        # (as Nova's PlacementFixture says): requests' own pool manager.
        self._plain_pools = fixtures.MonkeyPatch(
            'keystoneauth1.session.TCPKeepAliveAdapter.init_poolmanager',
            adapters.HTTPAdapter.init_poolmanager)

    def __enter__(self) -> 'BarePlacement':
        self._plain_pools.setUp()
        self._fixture.setUp()
        allow_reads()
        # Placement's get_enforcer parsed oslo.config's global CONF, which
        # nothing here uses; left parsed, the next Nova test in the process
        # cannot register its options (ArgsAlreadyParsedError).
        cfg.CONF.clear()
        return self

    def __exit__(self, *exc) -> None:
        self._fixture.cleanUp()
        self._plain_pools.cleanUp()

    @property
    def endpoint(self) -> str:
        return self._fixture.endpoint

    def call(self, method: str, path: str, body: dict | None = None):
        response = self.session.request(method, self.endpoint + path,
                                        json=body)
        if response.status_code >= 300:
            raise RuntimeError('%s %s: %s %s' % (
                method, path, response.status_code, response.text[:300]))
        return response.json() if response.text else None

    def _ensure(self, kind: str, name: str) -> None:
        if (kind, name) not in self._known and name.startswith('CUSTOM_'):
            self.call('PUT', '/%s/%s' % (kind, name))
            self._known.add((kind, name))

    def _provider(self, name: str, parent: str | None,
                  traits: Sequence[str]) -> str:
        rp = provider_uuid(name)
        self.call('POST', '/resource_providers', {
            'name': name, 'uuid': rp, 'parent_provider_uuid': parent})
        if traits:
            for trait in traits:
                self._ensure('traits', trait)
            self.call('PUT', '/resource_providers/%s/traits' % rp, {
                'resource_provider_generation': 0, 'traits': list(traits)})
        return rp

    def add_hosts(self, hosts: Sequence[HostSpec],
                  servers: Mapping[str, tuple[str, Sequence[GpuSpec]]]
                  | None = None) -> None:
        """Providers, traits, inventories and servers (one reshaper call).

        :param servers: consumer -> (host, GPUs) (:func:`servers_for`).
        """
        inventories = {}
        generations = {}
        for host in hosts:
            root = self._provider(host.name, None,
                                  ['COMPUTE_STATUS_DISABLED']
                                  if host.disabled else [])
            inventories[root] = {rc: {'total': total, 'max_unit': total}
                                 for rc, total in HOST_INVENTORY.items()}
            generations[root] = int(host.disabled)
            for gpu in host.gpus:
                self._ensure('resource_classes', gpu.resource_class)
                traits = _gpu_traits(gpu)
                rp = self._provider('%s_%s' % (host.name,
                                               gpu.address.upper()),
                                    root, traits)
                inventories[rp] = {gpu.resource_class: {
                    'total': 1, 'max_unit': 1,
                    'reserved': int(gpu.reserved)}}
                generations[rp] = int(bool(traits))
        self.call('POST', '/reshaper', {
            'inventories': {rp: {'resource_provider_generation':
                                 generations[rp], 'inventories': inv}
                            for rp, inv in inventories.items()},
            'allocations': {consumer: self._allocation(host, gpus)
                            for consumer, (host, gpus) in
                            (servers or {}).items()}})

    def add_hosts_in_bulk(
            self, hosts: Sequence[HostSpec],
            servers: Mapping[str, tuple[str, Sequence[GpuSpec]]]) -> None:
        """What :meth:`add_hosts` makes, written into placement's tables.

        For the benchmark's thousands of providers, which the API makes
        a call at a time (minutes on a busy machine). Classes and traits
        are made through the API, so placement's caches know them; what
        the command reads is then read by placement's own code.
        """
        names = {g.resource_class for h in hosts for g in h.gpus}
        traits = {'COMPUTE_STATUS_DISABLED'} | {
            t for h in hosts for g in h.gpus for t in _gpu_traits(g)}
        for rc in names:
            self._ensure('resource_classes', rc)
        for trait in traits:
            self._ensure('traits', trait)
        engine = placement_db.placement_context_manager.writer.get_engine()
        with engine.begin() as db:
            def ids(table: str) -> dict[str, int]:
                return {name: i for i, name in db.execute(sqlalchemy.text(
                    'SELECT id, name FROM %s' % table))}

            rc_ids, trait_ids = ids('resource_classes'), ids('traits')
            next_id = 1 + (db.execute(sqlalchemy.text(
                'SELECT MAX(id) FROM resource_providers')).scalar() or 0)
            rows: dict[str, list[dict]] = {
                'providers': [], 'inventories': [], 'traits': [],
                'consumers': [], 'allocations': []}
            provider_ids = {}

            def provider(name: str, root: int | None, inventory: dict,
                         reserved: int, names: Sequence[str]) -> int:
                nonlocal next_id
                rp, next_id = next_id, next_id + 1
                provider_ids[provider_uuid(name)] = rp
                rows['providers'].append({
                    'id': rp, 'uuid': provider_uuid(name), 'name': name,
                    'root': root or rp, 'parent': root})
                for rc, total in inventory.items():
                    rows['inventories'].append({
                        'rp': rp, 'rc': rc_ids[rc], 'total': total,
                        'reserved': reserved})
                rows['traits'].extend({'rp': rp, 'trait': trait_ids[t]}
                                      for t in names)
                return rp

            for host in hosts:
                root = provider(host.name, None, HOST_INVENTORY, 0,
                                ['COMPUTE_STATUS_DISABLED']
                                if host.disabled else [])
                for gpu in host.gpus:
                    provider('%s_%s' % (host.name, gpu.address.upper()),
                             root, {gpu.resource_class: 1},
                             int(gpu.reserved), _gpu_traits(gpu))
            owner = str(NAMESPACE)
            for table in ('projects', 'users'):
                db.execute(sqlalchemy.text(
                    'INSERT INTO %s (external_id) VALUES (:owner)' % table),
                    {'owner': owner})
            project, user = (db.execute(sqlalchemy.text(
                'SELECT MAX(id) FROM %s' % table)).scalar()
                for table in ('projects', 'users'))
            for consumer, (host, gpus) in servers.items():
                rows['consumers'].append({'uuid': consumer,
                                          'project': project, 'user': user})
                held = self._allocation(host, gpus)['allocations']
                rows['allocations'].extend(
                    {'rp': provider_ids[rp], 'consumer': consumer,
                     'rc': rc_ids[rc], 'used': used}
                    for rp, found in held.items()
                    for rc, used in found['resources'].items())
            for statement, table in _BULK:
                if rows[table]:
                    db.execute(sqlalchemy.text(statement), rows[table])

    def _allocation(self, host: str, gpus: Sequence[GpuSpec]) -> dict:
        allocations = {provider_uuid(host): {'resources': {
            'PCPU': 1, 'MEMORY_MB': 1024}}}
        for gpu in gpus:
            rp = gpu_uuid(host, gpu)
            allocations[rp] = {'resources': {gpu.resource_class: 1}}
            self._taken.add(rp)
        return {'allocations': allocations, 'consumer_generation': None,
                'project_id': str(NAMESPACE), 'user_id': str(NAMESPACE),
                'consumer_type': 'INSTANCE'}

    def allocate(self, consumer: str, host: str,
                 gpus: Sequence[GpuSpec]) -> None:
        """A server on ``host`` holding these GPUs."""
        self.call('PUT', '/allocations/%s' % consumer,
                  self._allocation(host, gpus))

    def fill(self, hosts: Sequence[HostSpec], seed: int,
             busy: float = 0.5) -> None:
        """Servers on the GPUs no server holds yet (:func:`servers_for`)."""
        for consumer, (host, taken) in servers_for(
                hosts, seed, busy, self._taken).items():
            self.allocate(consumer, host, taken)

    def free(self, consumer: str) -> None:
        """Delete a server's allocations (as deleting it does)."""
        self.call('DELETE', '/allocations/%s' % consumer)

    def clouds_yaml(self, directory: str) -> str:
        """A clouds.yaml with the cloud ``bare``: no auth, this endpoint."""
        return clouds_yaml(directory, self.endpoint)


def _gpu_traits(gpu: GpuSpec) -> list[str]:
    """The traits Nova puts on a GPU's provider from its device_spec."""
    return ((['CUSTOM_GPU_P2P_CLIQUE_ID_%d' % gpu.clique]
             if gpu.clique is not None else [])
            + ['CUSTOM_GPU_P2P_PARTITION_%d' % p for p in gpu.partitions])


#: add_hosts_in_bulk's rows into placement's tables.
_BULK = (
    ('INSERT INTO resource_providers (id, uuid, name, generation, '
     'root_provider_id, parent_provider_id) VALUES (:id, :uuid, :name, 1, '
     ':root, :parent)', 'providers'),
    ('INSERT INTO inventories (resource_provider_id, resource_class_id, '
     'total, reserved, min_unit, max_unit, step_size, allocation_ratio) '
     'VALUES (:rp, :rc, :total, :reserved, 1, :total, 1, 1.0)',
     'inventories'),
    ('INSERT INTO resource_provider_traits (resource_provider_id, '
     'trait_id) VALUES (:rp, :trait)', 'traits'),
    ('INSERT INTO consumers (uuid, project_id, user_id, generation) '
     'VALUES (:uuid, :project, :user, 1)', 'consumers'),
    ('INSERT INTO allocations (resource_provider_id, consumer_id, '
     'resource_class_id, used) VALUES (:rp, :consumer, :rc, :used)',
     'allocations'))


def allow_reads() -> None:
    """Let any caller read what the command reads (noauth2's callers)."""
    policy_fixture.PolicyFixture.set_rules(
        {rule: '' for rule in READ_RULES}, overwrite=False)


def clouds_yaml(directory: str, endpoint: str) -> str:
    """A clouds.yaml with the cloud ``bare``: no auth, that placement."""
    path = os.path.join(directory, 'clouds.yaml')
    with open(path, 'w') as f:
        f.write('clouds:\n  bare:\n    auth_type: none\n'
                '    placement_endpoint_override: %s\n' % endpoint)
    return path


def run_openstack(argv: Sequence[str], clouds_yaml: str,
                  cloud: str = 'bare') -> tuple[int, str, str]:
    """``openstack --os-cloud <cloud> ARGV`` in this process.

    In process, so that it reaches the wsgi-intercepted placement; the
    real OpenStackClient shell, which finds our plugin by its entry point.
    """
    from openstackclient import shell

    out, err = io.StringIO(), io.StringIO()
    env = {'OS_CLIENT_CONFIG_FILE': clouds_yaml}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = shell.OpenStackShell().run(
                    ['--os-cloud', cloud] + list(argv))
            except SystemExit as exc:
                code = exc.code
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return code, out.getvalue(), err.getvalue()


#: The demo cloud's servers (:func:`servers_for`), as the docs show them.
DEMO_SEED = 4


def demo_hosts() -> list[HostSpec]:
    """Four PCIe hosts (pairs, quads, an eight) and an HGX board."""
    return [pcie_host('pcie1', [0, 0, 1, 1, 2, 2, 3, 3]),
            pcie_host('pcie2', [0, 0, 0, 0, 1, 1, 1, 1]),
            pcie_host('pcie3', [0] * 8),
            pcie_host('pcie4', [0, 0, 1, 1, 2, 2, 3, 3]),
            hgx_host('hgx1')]


def main() -> int:
    """Run ``openstack ARGV`` against a small bare placement (a demo).

    Prints the command's output, then whether any Nova module was
    imported (none may be).
    """
    with BarePlacement() as placement, tempfile.TemporaryDirectory() as d:
        hosts = demo_hosts()
        placement.add_hosts(hosts)
        placement.fill(hosts, seed=DEMO_SEED)
        code, out, err = run_openstack(sys.argv[1:],
                                       placement.clouds_yaml(d))
    sys.stdout.write(out)
    sys.stderr.write(err)
    nova = sorted(m for m in sys.modules
                  if m == 'nova' or m.startswith('nova.'))
    print('nova modules imported: %s' % (', '.join(nova) or 'none'))
    return code


if __name__ == '__main__':
    sys.exit(main())
