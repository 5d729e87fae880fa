{%- extends 'gradebook_base.tpl' -%}
{%- block page_head -%}
<script>
var assignment_id = {{ assignment_id | tojson }};
</script>
<script src="{{ base_url }}/formgrader/static/js/gradebook_notebooks.js"></script>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/gradebook">人工评分</a></li>
  <li class="active">{{ assignment_id }}</li>
</ol>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>notebook</th>
  <th class="text-center">平均分</th>
  <th class="text-center">代码题平均分</th>
  <th class="text-center">书面题平均分</th>
  <th class="text-center">任务平均分</th>
  <th class="text-center">需要人工评分？</th>
  <th class="text-center">各状态人数</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
<tr><td colspan="7">正在载入……</td></tr>
{%- endblock -%}
