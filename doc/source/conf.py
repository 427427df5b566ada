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

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
]
config_generator_config_file = (
    '../../etc/nova-gpu-p2p/nova-gpu-p2p-config-generator.conf')
sample_config_basename = '_static/nova-gpu-p2p'
openstackdocs_repo_name = 'openstack/nova-gpu-p2p'
openstackdocs_bug_project = 'nova-gpu-p2p'
openstackdocs_auto_name = False
source_suffix = '.rst'
master_doc = 'index'
project = 'nova-gpu-p2p'
copyright = '2026, The nova-gpu-p2p Authors'
exclude_patterns = []
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = ['_static']
