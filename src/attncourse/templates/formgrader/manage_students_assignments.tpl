{%- extends 'manage_students_base.tpl' -%}
{%- block page_head -%}
<script>
var student_id = {{ student_id | tojson }};
</script>
<script src="{{ base_url }}/formgrader/static/js/manage_students_assignments.js"></script>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/manage_students">学生</a></li>
  <li class="active">{{ student_id }}</li>
</ol>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>作业</th>
  <th class="text-center">状态</th>
  <th class="text-center">总分</th>
  <th class="text-center">代码题</th>
  <th class="text-center">书面题</th>
  <th class="text-center">任务</th>
  <th class="text-center">需要人工评分？</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
<tr><td colspan="7">正在载入……</td></tr>
{%- endblock -%}
