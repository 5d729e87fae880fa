{%- extends 'gradebook_base.tpl' -%}
{%- block page_head -%}
<script>
var assignment_id = {{ assignment_id | tojson }};
var notebook_id = {{ notebook_id | tojson }};
</script>
<script src="{{ base_url }}/formgrader/static/js/gradebook_notebook_submissions.js"></script>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/gradebook">人工评分</a></li>
  <li><a href="{{ base_url }}/formgrader/gradebook/{{ assignment_id }}">{{ assignment_id }}</a></li>
  <li class="active">{{ notebook_id }}</li>
</ol>
{%- endblock -%}
{%- block messages -%}
<button id="toggle_names" onclick="toggleAllNames()">显示全部姓名</button>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th></th>
  <th>提交</th>
  <th class="text-center">状态</th>
  <th class="text-center">总分</th>
  <th class="text-center">代码题</th>
  <th class="text-center">书面题</th>
  <th class="text-center">任务</th>
  <th class="text-center">需要人工评分？</th>
  <th class="text-center">有测试未通过？</th>
  <th class="text-center">已标记？</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
<tr><td colspan="10">正在载入……</td></tr>
{%- endblock -%}
