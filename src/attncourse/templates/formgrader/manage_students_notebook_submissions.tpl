{%- extends 'manage_students_base.tpl' -%}
{%- block page_head -%}
<script>
var student_id = {{ student_id | tojson }};
var assignment_id = {{ assignment_id | tojson }};
</script>
<script src="{{ base_url }}/formgrader/static/js/manage_students_notebook_submissions.js"></script>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/manage_students">学生</a></li>
  <li><a href="{{ base_url }}/formgrader/manage_students/{{ student_id }}">{{ student_id }}</a></li>
  <li class="active">{{ assignment_id }}</li>
</ol>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>notebook</th>
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
<tr><td colspan="9">正在载入……</td></tr>
{%- endblock -%}
