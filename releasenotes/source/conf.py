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
    'reno.sphinxext',
]
openstackdocs_repo_name = 'openstack/nova-gpu-p2p'
openstackdocs_bug_project = 'nova-gpu-p2p'
openstackdocs_auto_name = False
templates_path = ['_templates']
source_suffix = '.rst'
master_doc = 'index'
project = 'nova-gpu-p2p Release Notes'
copyright = '2026, The nova-gpu-p2p Authors'
release = ''
version = ''
exclude_patterns = []
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = ['_static']
locale_dirs = ['locale/']
