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

"""Hosts cloned from a real compute's records, for 1000-host clouds (bench).

A real nova-compute of the in-process cloud takes seconds to start: a
cloud of 1000 took more than an hour. Nova's scheduler and placement read
only records: placement's provider tree of a host (inventories, traits,
usages) and Nova's service and compute node (PCI pools, NUMA topology).
A clone is a real compute's records under another host name, some of its
GPUs held by a consumer in placement and at count 0 in Nova's PCI pools,
as on a host whose server runs on them, and its root's
``CUSTOM_GPU_P2P_FREE_<n>`` traits what the driver would report for that.
Placement's rows are copied in its database directly (through its API a
clone took a second, most of it validating the same bodies again); Nova's
are created as Nova's objects. No nova-compute runs for a clone: the
benchmark asks only for servers no clone can take
(:attr:`lab.select_bench_cloud.SelectCloud.real_hosts`).
"""

from __future__ import annotations

import dataclasses
import uuid

from nova import objects
from placement import db_api as placement_db
import sqlalchemy

from nova_gpu_p2p import traits


@dataclasses.dataclass(frozen=True)
class Template:
    """A real compute's records: its provider tree and compute node."""

    hostname: str
    #: Placement's resource_providers rows of the tree, root first:
    #: (id, uuid, name, parent id).
    providers: tuple[tuple[int, str, str, int | None], ...]
    #: inventories rows by provider id, without their own ids.
    inventories: dict[int, list[dict]]
    #: trait ids by provider id.
    traits: dict[int, list[int]]
    #: The resource class of each GPU provider's one unit, by provider id.
    gpu_classes: dict[int, int]
    compute_node: objects.ComputeNode
    service: objects.Service


def _engine():
    return placement_db.placement_context_manager.writer.get_engine()


def _rows(connection, query: str, **values) -> list[dict]:
    """The query's rows; a tuple value binds ``IN :name``."""
    statement = sqlalchemy.text(query).bindparams(*(
        sqlalchemy.bindparam(name, expanding=True)
        for name, value in values.items() if isinstance(value, tuple)))
    return [dict(row._mapping)
            for row in connection.execute(statement, values)]


def read_template(context, hostname: str) -> Template:
    """``hostname``'s records, as the scheduler and placement read them."""
    with _engine().begin() as connection:
        root, = _rows(connection, 'SELECT id, uuid FROM resource_providers '
                      'WHERE name = :name', name=hostname)
        tree = _rows(connection, 'SELECT id, uuid, name, parent_provider_id '
                     'FROM resource_providers WHERE root_provider_id = :root '
                     'ORDER BY id', root=root['id'])
        ids = tuple(rp['id'] for rp in tree)
        inventories: dict[int, list[dict]] = {}
        for row in _rows(connection, 'SELECT * FROM inventories WHERE '
                         'resource_provider_id IN :ids', ids=ids):
            row.pop('id')
            inventories.setdefault(row['resource_provider_id'], []).append(
                row)
        held_traits: dict[int, list[int]] = {}
        for row in _rows(connection, 'SELECT trait_id, resource_provider_id '
                         'FROM resource_provider_traits WHERE '
                         'resource_provider_id IN :ids', ids=ids):
            held_traits.setdefault(row['resource_provider_id'], []).append(
                row['trait_id'])
    providers = tuple((rp['id'], rp['uuid'], rp['name'],
                       rp['parent_provider_id']) for rp in tree)
    return Template(
        hostname, providers, inventories, held_traits,
        {rp: rows[0]['resource_class_id'] for rp, rows in inventories.items()
         if rp != root['id']},
        objects.ComputeNode.get_by_uuid(context, root['uuid']),
        objects.Service.get_by_compute_host(context, hostname))


def gpu_address(template: Template, name: str) -> str:
    """A device provider's PCI address: Nova names it <host>_<address>."""
    return name[len(template.hostname) + 1:]


def clone(context, template: Template, hostname: str, held: set[str],
          host_gpus, scheduler_hosts) -> None:
    """``template``'s records as ``hostname``, ``held`` GPUs in use.

    ``held``: PCI addresses; ``host_gpus``: the template compute's
    :class:`nova_gpu_p2p.topology.host_gpus.HostGPUs`, for the free-size
    traits; ``scheduler_hosts``: the scheduler's HostManager, told the
    clone's (no) instances as a compute's periodic sync tells it.
    """
    uuids = _placement_rows(template, hostname, held,
                            traits.free_traits(host_gpus, (), held))
    _nova_records(context, template, hostname, uuids, held)
    # Unknown host: the scheduler reads its instances; then in sync.
    for _ in range(2):
        scheduler_hosts.sync_instance_info(context, hostname, [])


def _trait_ids(connection, names: set[str], create: bool = False
               ) -> list[int]:
    """The ids of those of the traits placement has; ``create`` the rest.

    As placement creates a custom trait the first time it is set.
    """
    for name in names if create else ():
        if not _rows(connection, 'SELECT id FROM traits WHERE name = :name',
                     name=name):
            connection.execute(sqlalchemy.text(
                'INSERT INTO traits (name) VALUES (:name)'), {'name': name})
    return [row['id'] for row in _rows(
        connection, 'SELECT id FROM traits WHERE name IN :names',
        names=tuple(names))] if names else []


def _placement_rows(template: Template, hostname: str, held: set[str],
                    free: set[str]) -> dict[int, str]:
    """The clone's provider tree and usage; its UUIDs by template id."""
    insert = sqlalchemy.text
    with _engine().begin() as connection:
        free_ids = set(_trait_ids(connection,
                                  set(traits.GPU_P2P_FREE.values())))
        now_free = _trait_ids(connection, free, create=True)
        first, = _rows(connection, 'SELECT COALESCE(MAX(id), 0) + 1 AS id '
                       'FROM resource_providers')
        ids = {old: first['id'] + n
               for n, (old, _, _, _) in enumerate(template.providers)}
        uuids = {old: str(uuid.uuid4()) for old in ids}
        root = ids[template.providers[0][0]]
        used = []
        for old, _, name, parent in template.providers:
            address = None if parent is None else gpu_address(template, name)
            connection.execute(insert(
                'INSERT INTO resource_providers (id, uuid, name, generation, '
                'root_provider_id, parent_provider_id) VALUES (:id, :uuid, '
                ':name, 1, :root, :parent)'), {
                    'id': ids[old], 'uuid': uuids[old], 'root': root,
                    'name': (hostname if address is None
                             else '%s_%s' % (hostname, address)),
                    'parent': None if parent is None else ids[parent]})
            trait_ids = template.traits.get(old, [])
            if parent is None:
                trait_ids = [trait for trait in trait_ids
                             if trait not in free_ids] + now_free
            if trait_ids:
                connection.execute(insert(
                    'INSERT INTO resource_provider_traits (trait_id, '
                    'resource_provider_id) VALUES (:trait, :rp)'),
                    [{'trait': trait, 'rp': ids[old]} for trait in trait_ids])
            connection.execute(insert(
                'INSERT INTO inventories (resource_provider_id, '
                'resource_class_id, total, reserved, min_unit, max_unit, '
                'step_size, allocation_ratio) VALUES (:rp, '
                ':resource_class_id, :total, :reserved, :min_unit, '
                ':max_unit, :step_size, :allocation_ratio)'),
                [dict(row, rp=ids[old])
                 for row in template.inventories.get(old, [])])
            if address in held:
                used.append((ids[old], template.gpu_classes[old]))
        if used:
            _hold(connection, used)
    return uuids


def _hold(connection, used: list[tuple[int, int]]) -> None:
    """One consumer holding one unit of each (provider id, class id)."""
    consumer = str(uuid.uuid4())
    owner = {}
    for table in ('projects', 'users'):
        connection.execute(sqlalchemy.text(
            'INSERT INTO %s (external_id) VALUES (:external)' % table),
            {'external': consumer})
        owner[table], = _rows(connection, 'SELECT id FROM %s WHERE '
                              'external_id = :external' % table,
                              external=consumer)
    connection.execute(sqlalchemy.text(
        'INSERT INTO consumers (uuid, project_id, user_id, generation) '
        'VALUES (:uuid, :project, :user, 1)'), {
            'uuid': consumer, 'project': owner['projects']['id'],
            'user': owner['users']['id']})
    connection.execute(sqlalchemy.text(
        'INSERT INTO allocations (resource_provider_id, consumer_id, '
        'resource_class_id, used) VALUES (:rp, :consumer, :rc, 1)'),
        [{'rp': rp, 'consumer': consumer, 'rc': rc} for rp, rc in used])


def _nova_records(context, template: Template, hostname: str,
                  uuids: dict[int, str], held: set[str]) -> None:
    """The clone's service and compute node, its held GPUs' pools empty."""
    service = objects.Service(
        context, host=hostname, binary=template.service.binary,
        topic=template.service.topic, report_count=0)
    service.create()
    objects.HostMapping(
        context, host=hostname,
        cell_mapping=objects.HostMapping.get_by_host(
            context, template.hostname).cell_mapping).create()
    node = template.compute_node
    copied = {name: getattr(node, name) for name in node.fields
              if node.obj_attr_is_set(name) and name not in (
                  'id', 'uuid', 'host', 'hypervisor_hostname', 'service_id',
                  'created_at', 'updated_at', 'deleted', 'deleted_at',
                  'pci_device_pools')}
    by_uuid = {old_uuid: uuids[old]
               for old, old_uuid, _, _ in template.providers}
    pools = []
    for pool in node.pci_device_pools:
        tags = dict(pool.tags)
        if 'rp_uuid' in tags:
            tags['rp_uuid'] = by_uuid[tags['rp_uuid']]
        pools.append(objects.PciDevicePool(
            product_id=pool.product_id, vendor_id=pool.vendor_id,
            numa_node=pool.numa_node, tags=tags,
            count=0 if tags.get('address') in held else pool.count))
    objects.ComputeNode(
        context, **copied, uuid=uuids[template.providers[0][0]],
        host=hostname, hypervisor_hostname=hostname, service_id=service.id,
        pci_device_pools=objects.PciDevicePoolList(objects=pools)).create()
